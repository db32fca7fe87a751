// Package gateway carries, inside the binary, the configuration directory
// this repository ships (config/), so that "gateway init" can write a working
// configuration where no checkout is at hand. It holds data only: the Go
// loader is internal/config, and config/ is what an operator edits and what
// the image ships as it is.
package gateway

import (
	"embed"
	"io/fs"
)

//go:embed config/gateway.yaml config/agents.yaml config/protocol.yaml config/registry.yaml config/workflows.yaml config/rbac_model.conf config/schemas config/specs
var shipped embed.FS

// ShippedConfig is config/ with paths relative to it: "gateway.yaml",
// "specs/arch-001.md".
func ShippedConfig() fs.FS {
	sub, err := fs.Sub(shipped, "config")
	if err != nil {
		// fs.Sub fails only for an invalid name; "config" is valid.
		panic(err)
	}
	return sub
}
