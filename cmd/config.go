package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/trust"
)

// Config is the config file (docs/configuration.md).
type Config struct {
	// Profile is the profile used when neither --profile nor DLQCTL_PROFILE names one.
	Profile    string              `yaml:"profile"`
	Profiles   map[string]Profile  `yaml:"profiles"`
	Categories *envelope.RulesSpec `yaml:"categories"`
	Policy     Policy              `yaml:"policy"`

	path string
}

// Profile is one named source with its settings.
type Profile struct {
	Source      string              `yaml:"source"`
	Fields      envelope.FieldNames `yaml:"fields"`
	EventIDFrom string              `yaml:"event_id_from"`
	KeyFrom     string              `yaml:"key_from"`
	// Secrets holds backends' secrets by key (kafka_password, …).
	Secrets    map[string]string   `yaml:"secrets"`
	Output     string              `yaml:"output"`
	Categories *envelope.RulesSpec `yaml:"categories"`
	// BackendKeys are the profile's other keys: secrets under a key a
	// backend declares (backend.Registration.ProfileKeys: redis_password,
	// pulsar_token). loadConfig refuses a key no backend declares.
	BackendKeys map[string]string `yaml:",inline"`
}

// secret is the profile's secret named key, for the backends
// (backend.OpenOptions.Secret).
func (p Profile) secret(key string) string {
	if v, ok := p.BackendKeys[key]; ok {
		return v
	}
	return p.Secrets[key]
}

// checkKeys refuses a profile key that is neither a Profile field nor one
// of backendKeys, so that a typo never silently does nothing.
func (c *Config) checkKeys(backendKeys []string) error {
	for _, name := range sortedKeys(c.Profiles) {
		for _, k := range sortedKeys(c.Profiles[name].BackendKeys) {
			if !slices.Contains(backendKeys, k) {
				known := append(profileFields(), backendKeys...)
				return usageErrorf("config %s: profile %q: unknown key %q%s (a profile takes %s)", c.path, name, k,
					didYouMeanText(k, known), strings.Join(known, ", "))
			}
		}
	}
	return nil
}

// profileFields are the keys every profile takes.
func profileFields() []string {
	var keys []string
	t := reflect.TypeFor[Profile]()
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// Policy holds the rules that redrive and resolve enforce; the rules
// themselves live in package trust.
type Policy = trust.Policy

// loadConfig reads the config file: explicit (flag or env) must exist;
// otherwise ./dlqctl.yaml, then $XDG_CONFIG_HOME/dlqctl/config.yaml, and
// none at all is fine. backendKeys are the profile keys the backends
// declare, besides those every profile takes.
func loadConfig(explicit string, getenv func(string) string, backendKeys []string) (*Config, error) {
	candidates := []string{explicit}
	if explicit == "" {
		xdg := getenv("XDG_CONFIG_HOME")
		if xdg == "" {
			if home := getenv("HOME"); home != "" {
				xdg = filepath.Join(home, ".config")
			}
		}
		candidates = []string{"dlqctl.yaml"}
		if xdg != "" {
			candidates = append(candidates, filepath.Join(xdg, "dlqctl", "config.yaml"))
		}
	}
	for _, p := range candidates {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) && explicit == "" {
			continue
		}
		if err != nil {
			return nil, usageErrorf("config: %v", err)
		}
		var c Config
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return nil, usageErrorf("config %s: %v", p, explainUnknownKeys(err, reflect.TypeOf(c)))
		}
		c.path = p
		if err := c.checkKeys(backendKeys); err != nil {
			return nil, err
		}
		return &c, nil
	}
	return &Config{}, nil
}

// profile returns the named profile ("" means the config's default, and no
// profile at all is fine then).
func (c *Config) profile(name string) (Profile, error) {
	if name == "" {
		name = c.Profile
		if name == "" {
			return Profile{}, nil
		}
	}
	p, ok := c.Profiles[name]
	if !ok {
		if c.path == "" {
			return Profile{}, usageErrorf("profile %q: no config file found", name)
		}
		known := sortedKeys(c.Profiles)
		list := "it has none"
		if len(known) > 0 {
			list = "its profiles: " + strings.Join(known, ", ")
		}
		return Profile{}, usageErrorf("profile %q: not in %s%s (%s)", name, c.path, didYouMeanText(name, known), list)
	}
	if _, err := p.Fields.Complete(); err != nil {
		return Profile{}, usageErrorf("profile %q: %v", name, err)
	}
	return p, nil
}

func (c *Config) String() string {
	if c.path == "" {
		return "(no config file)"
	}
	return fmt.Sprintf("config %s", c.path)
}

// readRulesFile reads a --rules YAML file.
func readRulesFile(path string) (envelope.RulesSpec, error) {
	var spec envelope.RulesSpec
	data, err := os.ReadFile(path)
	if err != nil {
		return spec, usageErrorf("--rules: %v", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&spec); err != nil && !errors.Is(err, io.EOF) {
		return spec, usageErrorf("--rules %s: %v", path, explainUnknownKeys(err, reflect.TypeOf(spec)))
	}
	return spec, nil
}
