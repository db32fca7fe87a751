package audit

import (
	"os"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
)

// Settings is gateway.yaml's audit: where this instance's chain is kept,
// how it is signed and committed, and what a lost entry does.
type Settings struct {
	// Dir holds the audit segments. Default "data/audit".
	Dir string `yaml:"dir"`
	// FailMode is closed (no audit entry, no response: 503) or open (serve and
	// count the loss). Default closed.
	FailMode string `yaml:"fail_mode"`
	// SigningKeyFile is an ed25519 private key (PEM) for checkpoints. Empty: unsigned.
	SigningKeyFile string `yaml:"signing_key_file"`
	// Chain is this instance's chain id. Default: $POD_NAME, else the host name.
	Chain string `yaml:"chain"`
	// SegmentMaxSize rotates segments at this size. Default 64MB.
	SegmentMaxSize confkit.Size `yaml:"segment_max_size"`
	// CheckpointEvery writes a checkpoint every N entries. Default 1000.
	CheckpointEvery int `yaml:"checkpoint_every"`
	// CheckpointInterval writes a checkpoint at least this often. Default 60s.
	CheckpointInterval confkit.Duration `yaml:"checkpoint_interval"`
	// CommitDelay holds a group commit open up to this long for requests in
	// progress that have no entry in it yet, so one fsync serves many.
	// Default 1ms; "0s" turns it off.
	CommitDelay *confkit.Duration `yaml:"commit_delay"`
}

// Check fills in the defaults, resolves the paths and reports what is
// wrong through r.
func (s *Settings) Check(r confkit.Reporter) {
	if s.Dir == "" {
		s.Dir = "data/audit"
	}
	r.Resolve(&s.Dir)
	r.Resolve(&s.SigningKeyFile)
	if s.FailMode == "" {
		s.FailMode = "closed"
	}
	if !confkit.OneOf(s.FailMode, "closed", "open") {
		r.Add(r.Line("fail_mode"), "audit.fail_mode %q: want closed or open%s", s.FailMode, confkit.DidYouMean(s.FailMode, []string{"closed", "open"}))
	}
	confkit.FileExists(r, r.Line("signing_key_file"), "audit.signing_key_file", s.SigningKeyFile)
	if s.Chain == "" {
		s.Chain = defaultChain(r.LookupEnv)
	}
	if strings.ContainsAny(s.Chain, `/\ `) {
		r.Add(r.Line("chain"), "audit.chain %q: must not contain slashes or spaces", s.Chain)
	}
	if s.SegmentMaxSize == 0 {
		s.SegmentMaxSize = 64 << 20
	}
	if s.CheckpointEvery == 0 {
		s.CheckpointEvery = 1000
	}
	if s.CheckpointEvery < 0 {
		r.Add(r.Line("checkpoint_every"), "audit.checkpoint_every: must be positive")
	}
	if s.CheckpointInterval == 0 {
		s.CheckpointInterval = confkit.Duration(time.Minute)
	}
	switch d := s.CommitDelay; {
	case d == nil:
		s.CommitDelay = new(confkit.Duration(time.Millisecond))
	case *d < 0 || *d > confkit.Duration(time.Second):
		r.Add(r.Line("commit_delay"), "audit.commit_delay %s: want between 0s and 1s", d.D())
	}
}

// defaultChain names the chain of an instance that names none: its pod,
// else its host.
func defaultChain(env func(string) (string, bool)) string {
	if v, ok := env("POD_NAME"); ok && v != "" {
		return v
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "gateway"
}
