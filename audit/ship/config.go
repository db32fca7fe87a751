// Package ship copies an audit trail to S3-compatible object storage
// (AWS S3, GCS in interoperability mode, MinIO, SeaweedFS, ...) and reads
// it back from there: every closed segment, every checkpoint and every
// torn file of each chain goes under <prefix>/<chain>/, checksummed and
// uploaded once, so that `gateway audit verify --from` and
// `audit export --from` check the whole fleet's trail in one place.
//
// The local directory stays the write-ahead source of truth: shipping runs
// beside the log, never in front of an answer, and what it has not shipped
// yet is its backlog.
package ship

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Config is audit.ship in gateway.yaml. ${VAR} in any value is expanded
// from the environment by the loader, which is how credentials come in.
type Config struct {
	// URL is s3://bucket/prefix; each chain's files go under
	// prefix/<chain>/.
	URL string `yaml:"url"`
	// Endpoint is the S3 API's base URL (https://minio.example:9000).
	// Empty: AWS S3 in Region.
	Endpoint string `yaml:"endpoint"`
	// Region is the bucket's region. Default us-east-1.
	Region string `yaml:"region"`
	// AccessKeyID and SecretAccessKey (and SessionToken for temporary
	// credentials) sign the requests. Empty: the AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN environment variables.
	AccessKeyID     string `yaml:"access_key_id"`
	SecretAccessKey string `yaml:"secret_access_key"`
	SessionToken    string `yaml:"session_token"`
	// PathStyle addresses the bucket as endpoint/bucket/key rather than
	// bucket.endpoint/key (MinIO, SeaweedFS and most on-premises servers).
	PathStyle bool `yaml:"path_style"`
	// Interval is how often the directory is looked at for files to ship.
	// Default 30s.
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds each call to the storage (a large segment's upload
	// gets more, in proportion to its size). Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// ShutdownTimeout bounds the last pass when the gateway stops, which
	// ships the segment being written and the final checkpoint. The pod's
	// termination grace period must cover it after shutdown_timeout.
	// Default 20s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// Retention sets S3 Object Lock retention on every object uploaded;
	// the bucket must have Object Lock enabled. Nil: none.
	Retention *Retention `yaml:"retention"`
}

// Retention is S3 Object Lock retention for each uploaded object.
type Retention struct {
	// Mode is governance (users with a special permission may shorten it)
	// or compliance (nobody may, not even the account's root).
	Mode string `yaml:"mode"`
	// Days the object stays undeletable and unchanged after its upload.
	Days int `yaml:"days"`
}

const (
	defaultInterval = 30 * time.Second
	defaultTimeout  = 30 * time.Second
	defaultShutdown = 20 * time.Second
	defaultRegion   = "us-east-1"
)

// Problem is a setting at fault: Key is its path under audit.ship.
type Problem struct {
	Key []string
	Msg string
}

// Validate fills in the defaults and returns every problem, each naming
// its setting.
func (c *Config) Validate() []Problem {
	var out []Problem
	add := func(msg string, key ...string) { out = append(out, Problem{Key: key, Msg: msg}) }
	if _, _, err := ParseURL(c.URL); err != nil {
		add(fmt.Sprintf("audit.ship.url: %v", err), "url")
	}
	if c.Endpoint != "" {
		if _, _, err := parseEndpoint(c.Endpoint); err != nil {
			add(fmt.Sprintf("audit.ship.endpoint: %v", err), "endpoint")
		}
	}
	if c.Region == "" {
		c.Region = defaultRegion
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		add("audit.ship: set both access_key_id and secret_access_key, or neither (then the AWS_* environment variables are used)", "access_key_id")
	}
	for _, d := range []struct {
		key string
		v   *time.Duration
		def time.Duration
	}{{"interval", &c.Interval, defaultInterval}, {"timeout", &c.Timeout, defaultTimeout}, {"shutdown_timeout", &c.ShutdownTimeout, defaultShutdown}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < time.Second {
			add(fmt.Sprintf("audit.ship.%s %s: want at least 1s", d.key, *d.v), d.key)
		}
	}
	if r := c.Retention; r != nil {
		if r.Mode != "governance" && r.Mode != "compliance" {
			add(fmt.Sprintf("audit.ship.retention.mode %q: want governance or compliance", r.Mode), "retention", "mode")
		}
		if r.Days < 1 || r.Days > 36500 {
			add(fmt.Sprintf("audit.ship.retention.days %d: want 1 to 36500", r.Days), "retention", "days")
		}
	}
	return out
}

// ParseURL splits s3://bucket/prefix. The prefix has no leading or
// trailing slash and may be empty.
func ParseURL(s string) (bucket, prefix string, err error) {
	if s == "" {
		return "", "", errors.New("required (s3://bucket/prefix)")
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" {
		return "", "", fmt.Errorf("%q: want s3://bucket/prefix", s)
	}
	prefix = strings.Trim(u.Path, "/")
	if strings.Contains(prefix, "//") || strings.Contains("/"+prefix+"/", "/../") || strings.Contains("/"+prefix+"/", "/./") {
		return "", "", fmt.Errorf("%q: the prefix must not have empty, . or .. parts", s)
	}
	return u.Host, prefix, nil
}

// parseEndpoint reads http(s)://host[:port] into minio's host and TLS flag.
func parseEndpoint(s string) (host string, secure bool, err error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false, fmt.Errorf("%q: want http(s)://host[:port], without a path or credentials", s)
	}
	return u.Host, u.Scheme == "https", nil
}

// String leaves the credentials out, so a Config is never logged with them.
func (c Config) String() string {
	return fmt.Sprintf("ship to %s (endpoint %q, region %s)", c.URL, c.Endpoint, c.Region)
}
