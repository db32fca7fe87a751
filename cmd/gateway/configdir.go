package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sacpgw/gateway/internal/config"
)

// configEnv names the configuration directory when --config is not given.
const configEnv = "GATEWAY_CONFIG"

// systemConfigDir is the last place a gateway looks for its configuration.
const systemConfigDir = "/etc/gateway"

// configSearch finds the configuration directory of a command run without
// --config: $GATEWAY_CONFIG, else the first of ./config, the user's
// configuration folder (~/.config/gateway) and /etc/gateway that holds a
// gateway.yaml. A folder without gateway.yaml is passed over, so that an
// unrelated ./config does not shadow the real one. The environment comes
// in as functions so the order can be tested without touching /etc.
type configSearch struct {
	getenv  func(string) string
	userDir func() (string, error)
	system  string
}

func defaultConfigSearch() configSearch {
	return configSearch{getenv: os.Getenv, userDir: os.UserConfigDir, system: systemConfigDir}
}

// places are the folders searched after $GATEWAY_CONFIG, in order.
func (s configSearch) places() []string {
	out := []string{"config"}
	if d, err := s.userDir(); err == nil && d != "" {
		out = append(out, filepath.Join(d, "gateway"))
	}
	return append(out, s.system)
}

// errNoConfig is a search that found nothing; its message is the one line
// a person sees, saying how to get a configuration.
type errNoConfig struct{ looked []string }

func (e errNoConfig) Error() string {
	return fmt.Sprintf("no configuration found (looked in %s; %s is not set): run `gateway init` to write one, or pass --config DIR",
		strings.Join(e.looked, ", "), configEnv)
}

// find returns the configuration directory, or errNoConfig.
func (s configSearch) find() (string, error) {
	if d := s.getenv(configEnv); d != "" {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("%s=%s: no such directory", configEnv, d)
		}
		return d, nil
	}
	places := s.places()
	for _, d := range places {
		if fi, err := os.Stat(filepath.Join(d, config.GatewayFile)); err == nil && fi.Mode().IsRegular() {
			return d, nil
		}
	}
	return "", errNoConfig{looked: places}
}

// configHelp is the flag's description wherever a command takes --config.
const (
	configDefault = "(default: $" + configEnv + ", else the first of ./config, ~/.config/gateway, " + systemConfigDir + " that holds gateway.yaml)"
	configHelp    = "configuration directory " + configDefault
)

// needConfig fills *dir, when no --config gave it, with the directory the
// search finds; it prints the search's one-line answer and returns false
// when there is none.
func needConfig(dir *string, stderr io.Writer) bool {
	if *dir != "" {
		return true
	}
	d, err := defaultConfigSearch().find()
	if err != nil {
		fmt.Fprintf(stderr, "gateway: %v\n", err)
		return false
	}
	*dir = d
	return true
}

// loadConfig loads the configuration of *dir (found by needConfig when no
// --config gave it); false, with the problems printed, when there is none
// to load or it is not valid.
func loadConfig(dir *string, stderr io.Writer) (*config.Config, bool) {
	if !needConfig(dir, stderr) {
		return nil, false
	}
	cfg, err := config.Load(*dir)
	if err != nil {
		reportConfig(stderr, err)
		return nil, false
	}
	return cfg, true
}

// hasFlag reports whether args set the flag name, in any of the flag
// package's spellings, before a "--".
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}
