package audit

import (
	"fmt"
	"os"
)

// openLockFile opens (creating it) the chain's lock file, which lockChain
// then locks where the platform can.
func openLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	return f, nil
}
