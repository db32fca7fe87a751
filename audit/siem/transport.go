package siem

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/egress"
)

// sender makes one export call. It returns nil only when the collector
// acknowledged the whole request; rejected counts the records it
// acknowledged but refused (OTLP partial success: malformed, not retried).
type sender interface {
	export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (rejected int64, err error)
	close() error
}

// maxResponseBytes bounds what is read of a collector's answer.
const maxResponseBytes = 64 << 10

// newSender builds the client of c.Protocol. Every connection it opens is
// dialed through policy (the addresses the gateway's own outbound calls
// may reach), without a proxy from the environment.
func newSender(c Config, policy egress.Policy) (sender, error) {
	target, err := c.target()
	if err != nil {
		return nil, err
	}
	tlsConf, err := confkit.ClientTLS(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("audit.otlp.ca_file: %w", err)
	}
	if c.Protocol == "grpc" {
		return newGRPCSender(target, c, tlsConf, policy)
	}
	t := policy.Guard(http.DefaultTransport.(*http.Transport).Clone())
	t.TLSClientConfig = tlsConf
	client := &http.Client{Transport: t, Timeout: c.Timeout, CheckRedirect: egress.NoRedirects}
	return &httpSender{url: target, headers: c.Headers, client: client}, nil
}

// httpSender posts OTLP/HTTP protobuf.
type httpSender struct {
	url     string
	headers Headers
	client  *http.Client
}

func (s *httpSender) export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (int64, error) {
	body, err := proto.Marshal(req)
	if err != nil {
		return 0, fmt.Errorf("encode: %w", err)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range s.headers {
		r.Header.Set(k, v)
	}
	r.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := s.client.Do(r)
	if err != nil {
		return 0, fmt.Errorf("post to the collector: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return 0, fmt.Errorf("read the collector's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		// The answer's text is not repeated: it is the collector's, and
		// the gateway's log is no place for whatever it echoes.
		return 0, fmt.Errorf("the collector answered %s", resp.Status)
	}
	var out collogspb.ExportLogsServiceResponse
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-protobuf") && len(data) > 0 {
		if err := proto.Unmarshal(data, &out); err != nil {
			return 0, fmt.Errorf("the collector's answer does not decode: %w", err)
		}
	}
	return out.GetPartialSuccess().GetRejectedLogRecords(), nil
}

func (s *httpSender) close() error {
	s.client.CloseIdleConnections()
	return nil
}

// grpcSender calls the OTLP LogsService.
type grpcSender struct {
	conn   *grpc.ClientConn
	client collogspb.LogsServiceClient
	md     metadata.MD
}

func newGRPCSender(target string, c Config, tlsConf *tls.Config, policy egress.Policy) (*grpcSender, error) {
	creds := credentials.NewTLS(tlsConf)
	if strings.HasPrefix(c.Endpoint, "http://") {
		creds = insecure.NewCredentials() // loopback only (Check)
	}
	dialer := policy.Dialer(c.Timeout)
	conn, err := grpc.NewClient("passthrough:///"+target,
		grpc.WithTransportCredentials(creds),
		grpc.WithNoProxy(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		return nil, fmt.Errorf("audit.otlp: %w", err)
	}
	md := metadata.MD{}
	for k, v := range c.Headers {
		md.Set(strings.ToLower(k), v)
	}
	return &grpcSender{conn: conn, client: collogspb.NewLogsServiceClient(conn), md: md}, nil
}

func (s *grpcSender) export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (int64, error) {
	resp, err := s.client.Export(metadata.NewOutgoingContext(ctx, s.md), req)
	if err != nil {
		return 0, fmt.Errorf("export to the collector: %w", err)
	}
	return resp.GetPartialSuccess().GetRejectedLogRecords(), nil
}

func (s *grpcSender) close() error { return s.conn.Close() }
