package ship

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sacpgw/gateway/internal/egress"
)

// store is a bucket and prefix behind an S3 client; every call it makes
// has a deadline.
type store struct {
	c       *minio.Client
	bucket  string
	prefix  string // "" or without slashes at either end
	timeout time.Duration
}

// newStore builds the client for cfg (validated). With a policy, every
// connection is dialed through it (the gateway's outbound guard); nil is
// for the command line, run by an operator against an endpoint they named.
func newStore(cfg Config, policy *egress.Policy) (*store, error) {
	bucket, prefix, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	host, secure := "s3.amazonaws.com", true
	if cfg.Endpoint != "" {
		if host, secure, err = parseEndpoint(cfg.Endpoint); err != nil {
			return nil, err
		}
	}
	creds := credentials.NewEnvAWS()
	if cfg.AccessKeyID != "" {
		creds = credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	if policy != nil {
		t = policy.Guard(t)
	}
	t.ResponseHeaderTimeout = timeout
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	region := cfg.Region
	if region == "" {
		region = defaultRegion
	}
	c, err := minio.New(host, &minio.Options{Creds: creds, Secure: secure, Region: region, BucketLookup: lookup,
		Transport: t, MaxRetries: 3})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", cfg.URL, err)
	}
	return &store{c: c, bucket: bucket, prefix: prefix, timeout: timeout}, nil
}

// key is the object key of name under prefix.
func (s *store) key(name string) string {
	if s.prefix == "" {
		return name
	}
	return s.prefix + "/" + name
}

// callCtx bounds one call; size adds time for the bytes it moves, at a
// floor of 1 MiB/s, so a large segment is not cut off by the base timeout.
func (s *store) callCtx(ctx context.Context, size int64) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout+time.Duration(size>>20)*time.Second)
}
