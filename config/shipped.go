package config

import "embed"

// Shipped is the configuration directory this repository ships (config/
// without the tests' testdata), inside the binary so that "gateway init"
// can write a working configuration where no checkout is at hand. Paths
// are relative to the directory: "gateway.yaml", "specs/arch-001.md".
//
//go:embed gateway.yaml agents.yaml protocol.yaml registry.yaml workflows.yaml rbac_model.conf schemas specs
var Shipped embed.FS
