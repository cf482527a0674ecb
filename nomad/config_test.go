package nomad

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var envVars = []string{"NOMAD_ADDR", "NOMAD_REGION", "NOMAD_NAMESPACE", "NOMAD_TOKEN", "NOMAD_CACERT",
	"NOMAD_CLIENT_CERT", "NOMAD_CLIENT_KEY", "NOMAD_TLS_SERVER_NAME", "NOMAD_SKIP_VERIFY"}

// clearEnv unsets the NOMAD_ variables for the test (t.Setenv restores
// them).
func clearEnv(t *testing.T) {
	for _, v := range envVars {
		t.Setenv(v, "")
	}
}

func TestConfigFromEnv(t *testing.T) {
	clearEnv(t)
	c, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c != DefaultConfig() {
		t.Fatalf("with no variables: %+v, want the defaults", c)
	}

	for k, v := range map[string]string{
		"NOMAD_ADDR": "https://nomad.example:4646", "NOMAD_REGION": "eu", "NOMAD_NAMESPACE": "analytics",
		"NOMAD_TOKEN": "s3cr3t", "NOMAD_CACERT": "/etc/ca.pem", "NOMAD_CLIENT_CERT": "/etc/c.pem",
		"NOMAD_CLIENT_KEY": "/etc/k.pem", "NOMAD_TLS_SERVER_NAME": "server.eu.nomad", "NOMAD_SKIP_VERIFY": "true",
	} {
		t.Setenv(k, v)
	}
	c, err = ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Address, want.Region, want.Namespace, want.Token = "https://nomad.example:4646", "eu", "analytics", "s3cr3t"
	want.TLS = TLSConfig{CACert: "/etc/ca.pem", ClientCert: "/etc/c.pem", ClientKey: "/etc/k.pem", ServerName: "server.eu.nomad", SkipVerify: true}
	if c != want {
		t.Fatalf("ConfigFromEnv = %+v\nwant %+v", c, want)
	}

	t.Setenv("NOMAD_SKIP_VERIFY", "yes please")
	if _, err := ConfigFromEnv(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "NOMAD_SKIP_VERIFY") {
		t.Fatalf("bad NOMAD_SKIP_VERIFY: %v", err)
	}
	t.Setenv("NOMAD_SKIP_VERIFY", "0")
	t.Setenv("NOMAD_CLIENT_KEY", "")
	if _, err := ConfigFromEnv(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "NOMAD_CLIENT_KEY") {
		t.Fatalf("a certificate without its key: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string // "" valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"unix socket", func(c *Config) { c.Address = "unix:///var/run/nomad.sock" }, ""},
		{"https", func(c *Config) { c.Address = "https://10.0.0.1:4646/" }, ""},
		{"no scheme", func(c *Config) { c.Address = "127.0.0.1:4646" }, "scheme"},
		{"ftp", func(c *Config) { c.Address = "ftp://x:1" }, "scheme"},
		{"no host", func(c *Config) { c.Address = "http://" }, "no host"},
		{"path", func(c *Config) { c.Address = "http://x:4646/v1" }, "without a path"},
		{"empty unix", func(c *Config) { c.Address = "unix://" }, "no socket"},
		{"token with newline", func(c *Config) { c.Token = "abc\n" }, "token"},
		{"key without cert", func(c *Config) { c.TLS.ClientKey = "/k.pem" }, "both"},
		{"zero call timeout", func(c *Config) { c.CallTimeout = 0 }, "CallTimeout"},
		{"zero request timeout", func(c *Config) { c.RequestTimeout = 0 }, "RequestTimeout"},
		{"backoff reversed", func(c *Config) { c.RetryBackoffMax = c.RetryBackoffMin / 2 }, "backoff"},
		{"no GC threshold", func(c *Config) { c.JobGCThreshold = 0 }, "JobGCThreshold"},
		{"margin too big", func(c *Config) { c.HorizonMargin = c.JobGCThreshold }, "HorizonMargin"},
	} {
		c := DefaultConfig()
		tc.change(&c)
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestMemoryHorizon(t *testing.T) {
	c := DefaultConfig()
	if got := c.MemoryHorizon(); got != 4*time.Hour-15*time.Minute {
		t.Fatalf("default horizon %v", got)
	}
	c.JobGCThreshold, c.HorizonMargin = time.Hour, time.Minute
	cl, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := cl.MemoryHorizon(); got != 59*time.Minute {
		t.Fatalf("horizon %v, want 59m", got)
	}
}

func TestNewRefusesUnreadableTLS(t *testing.T) {
	c := DefaultConfig()
	c.Address = "https://x:4646"
	c.TLS.ClientCert, c.TLS.ClientKey = "/nonexistent/c.pem", "/nonexistent/k.pem"
	if _, err := New(c); !errors.Is(err, ErrConfig) {
		t.Fatalf("New with missing certificate files: %v", err)
	}
}

// TestConfigRefusesWildcardNamespace: NOMAD_NAMESPACE=* (which operators
// set for the CLI to list every namespace) is no namespace to dispatch in:
// Nomad looks the parent up in a namespace named "*", refuses every
// dispatch as "parameterized job not found", and a look-up lists children
// of every namespace. Found in review: the server took it from the
// environment, and every launch of a job naming no namespace failed.
func TestConfigRefusesWildcardNamespace(t *testing.T) {
	clearEnv(t)
	t.Setenv("NOMAD_NAMESPACE", "*")
	if _, err := ConfigFromEnv(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "NOMAD_NAMESPACE") {
		t.Fatalf("ConfigFromEnv with NOMAD_NAMESPACE=* = %v; want ErrConfig naming NOMAD_NAMESPACE", err)
	}
}
