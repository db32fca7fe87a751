// Package policyfs carries the gateway's default Rego policies and their
// tests (directory gateway/) inside the binary, as Regal's bundle package
// does. Load them with policy.New(policy.Options{FS: policyfs.FS}); run
// their tests with "gateway policy test rego" or "opa test rego".
package policyfs

import "embed"

// FS holds gateway/**.rego (policies and *_test.rego). Paths are relative
// to this directory, e.g. "gateway/approval/approval.rego".
//
//go:embed gateway
var FS embed.FS
