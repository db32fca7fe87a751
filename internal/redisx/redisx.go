// Package redisx says where the gateway's shared state lives and connects
// to it: one Redis node, a Sentinel-managed primary or a Redis Cluster,
// each with TLS and ACL credentials, behind go-redis' UniversalClient.
//
// Every store of the gateway (limits, budgets, approvals, sessions,
// queues, workflow runs, caches) takes a redis.UniversalClient, so the
// same code runs on any of the three; what a Cluster adds is that keys a
// script or transaction touches together share a {hash tag}, which each
// store's key layout provides.
package redisx

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sacpgw/gateway/internal/confkit"
)

// Settings is the state.redis block of gateway.yaml. Exactly one of URL,
// Sentinel and Cluster says which kind of deployment it is.
type Settings struct {
	// URL is one node: redis://[user:password@]host:port/db, or rediss://
	// for TLS.
	URL string `yaml:"url"`
	// Sentinel is a primary and its replicas watched by Sentinels: the
	// client asks the Sentinels where the primary is and follows a
	// failover.
	Sentinel *Sentinel `yaml:"sentinel"`
	// Cluster is a Redis (or Valkey) Cluster: the seed nodes, from which
	// the client learns the whole cluster and follows its changes.
	Cluster *Cluster `yaml:"cluster"`
	// Username and Password are the ACL credentials on the data nodes
	// (with URL they may be in the URL instead, not in both places).
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// DB is the database number with Sentinel (with URL it is the URL's
	// path; a Cluster has only database 0).
	DB int `yaml:"db"`
	// TLS, when present, encrypts every connection (data nodes and
	// Sentinels); an empty block trusts the system's roots.
	TLS *TLS `yaml:"tls"`
}

// Sentinel names the primary and the Sentinels that watch it.
type Sentinel struct {
	// Master is the name the Sentinels know the primary by.
	Master string `yaml:"master"`
	// Addrs are Sentinels' host:port; one that answers is enough.
	Addrs []string `yaml:"addrs"`
	// Username and Password are the Sentinels' own credentials, when they
	// have any (they often differ from the data nodes').
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

// Cluster lists seed nodes of a Cluster.
type Cluster struct {
	// Addrs are host:port of one or more nodes; the client discovers the
	// others with CLUSTER SLOTS.
	Addrs []string `yaml:"addrs"`
}

// TLS configures encrypted connections.
type TLS struct {
	// CAFile is a PEM bundle of the roots to trust instead of the
	// system's (a managed service's or a private CA).
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a client certificate, for servers that
	// require one (tls-auth-clients yes).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the servers' certificates must carry, when
	// it is not the host the client dials.
	ServerName string `yaml:"server_name"`
}

// Kind is which deployment s describes: "single", "sentinel" or "cluster"
// ("" when s names none).
func (s *Settings) Kind() string {
	switch {
	case s.Sentinel != nil:
		return "sentinel"
	case s.Cluster != nil:
		return "cluster"
	case s.URL != "":
		return "single"
	}
	return ""
}

// Problem is one mistake in Settings: Path is where, under state.redis
// (nil: the block itself).
type Problem struct {
	Path []string
	Msg  string
}

// Check returns every mistake in s, without connecting to anything.
func (s *Settings) Check() []Problem {
	var ps []Problem
	add := func(msg string, path ...string) { ps = append(ps, Problem{Path: path, Msg: msg}) }
	n := 0
	for _, set := range []bool{s.URL != "", s.Sentinel != nil, s.Cluster != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		add("state.redis: give exactly one of url (one node), sentinel (a primary watched by Sentinels) and cluster (a Redis Cluster)")
		return ps
	}
	switch {
	case s.URL != "":
		ps = append(ps, s.checkURL()...)
	case s.Sentinel != nil:
		if s.Sentinel.Master == "" {
			add("state.redis.sentinel.master: the primary's name is required (SENTINEL MASTERS lists it)", "sentinel", "master")
		}
		ps = append(ps, checkAddrs(s.Sentinel.Addrs, "sentinel", "addrs")...)
		if s.DB < 0 {
			add("state.redis.db: must not be negative", "db")
		}
	case s.Cluster != nil:
		ps = append(ps, checkAddrs(s.Cluster.Addrs, "cluster", "addrs")...)
		if s.DB != 0 {
			add("state.redis.db: a Cluster has only database 0", "db")
		}
	}
	if t := s.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		add("state.redis.tls: cert_file and key_file go together", "tls")
	}
	return ps
}

func (s *Settings) checkURL() []Problem {
	u, err := url.Parse(s.URL)
	if err != nil {
		// url.Parse's error quotes the URL, password included.
		return []Problem{{Path: []string{"url"}, Msg: "state.redis.url: not a URL"}}
	}
	var ps []Problem
	if _, err := redis.ParseURL(s.URL); err != nil {
		ps = append(ps, Problem{Path: []string{"url"}, Msg: "state.redis.url: want redis://host:port/db or rediss:// (TLS)"})
	}
	if u.User != nil && (s.Username != "" || s.Password != "") {
		ps = append(ps, Problem{Path: []string{"url"}, Msg: "state.redis.url: credentials in the URL and in username/password: give them in one place"})
	}
	if s.DB != 0 {
		ps = append(ps, Problem{Path: []string{"db"}, Msg: "state.redis.db: with url, the database is the URL's path (redis://host:6379/2)"})
	}
	if s.TLS != nil && u.Scheme != "rediss" {
		ps = append(ps, Problem{Path: []string{"tls"}, Msg: "state.redis.tls: the url must then be rediss://"})
	}
	return ps
}

func checkAddrs(addrs []string, path ...string) []Problem {
	where := "state.redis." + path[0] + "." + path[1]
	if len(addrs) == 0 {
		return []Problem{{Path: path, Msg: where + ": at least one host:port is required"}}
	}
	var ps []Problem
	for i, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		p, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
			ps = append(ps, Problem{Path: append(path, strconv.Itoa(i)), Msg: fmt.Sprintf("%s[%d] %q: want host:port", where, i, a)})
		}
	}
	return ps
}

// Timeouts are the deadlines of every call, as NewClient applies them.
type Timeouts struct {
	// Call bounds dialing, reading, writing and waiting for a pooled
	// connection (state.timeout); zero keeps go-redis' defaults.
	Call time.Duration
}

// NewClient connects to what s names (Check it first). The client dials
// lazily and reconnects by itself; with Sentinel it follows the primary
// through failovers, with a Cluster it follows slot moves.
//
// go-redis' own retries stay on: a call on a connection that a restart or
// failover broke is sent again on a fresh one, within the call's context.
// A Cluster also follows MOVED and ASK redirects.
func NewClient(s Settings, t Timeouts) (redis.UniversalClient, error) {
	tlsConf, err := s.tlsConfig()
	if err != nil {
		return nil, err
	}
	switch s.Kind() {
	case "single":
		opt, err := redis.ParseURL(s.URL)
		if err != nil {
			return nil, errors.New("state.redis.url: want redis://host:port/db or rediss:// (TLS)")
		}
		if s.Username != "" || s.Password != "" {
			opt.Username, opt.Password = s.Username, s.Password
		}
		if tlsConf != nil {
			if opt.TLSConfig != nil && tlsConf.ServerName == "" {
				tlsConf.ServerName = opt.TLSConfig.ServerName
			}
			opt.TLSConfig = tlsConf
		}
		opt.ContextTimeoutEnabled = true
		if t.Call > 0 {
			opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = t.Call, t.Call, t.Call, t.Call
		}
		return redis.NewClient(opt), nil
	case "sentinel":
		opt := &redis.FailoverOptions{
			MasterName: s.Sentinel.Master, SentinelAddrs: s.Sentinel.Addrs,
			SentinelUsername: s.Sentinel.Username, SentinelPassword: s.Sentinel.Password,
			Username: s.Username, Password: s.Password, DB: s.DB,
			TLSConfig: tlsConf, ContextTimeoutEnabled: true,
		}
		if t.Call > 0 {
			opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = t.Call, t.Call, t.Call, t.Call
		}
		return redis.NewFailoverClient(opt), nil
	case "cluster":
		opt := &redis.ClusterOptions{
			Addrs: s.Cluster.Addrs, Username: s.Username, Password: s.Password,
			TLSConfig: tlsConf, ContextTimeoutEnabled: true,
		}
		if t.Call > 0 {
			opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = t.Call, t.Call, t.Call, t.Call
		}
		return redis.NewClusterClient(opt), nil
	}
	return nil, errors.New("state.redis: give exactly one of url, sentinel and cluster")
}

// tlsConfig is s.TLS as a tls.Config, nil without TLS.
func (s *Settings) tlsConfig() (*tls.Config, error) {
	t := s.TLS
	if t == nil {
		return nil, nil
	}
	c, err := confkit.ClientTLS(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("state.redis.tls.ca_file: %w", err)
	}
	c.ServerName = t.ServerName
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("state.redis.tls: client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
