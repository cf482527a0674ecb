package nomad

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config says which Nomad to call and how. Every replica that may lead
// must use the same Namespace and Region: a job's spec that names none
// takes them, and Nomad's idempotency token is scoped by (namespace,
// region, parent job), so a leader with another default would dispatch a
// second child for the same launch.
type Config struct {
	// Address is the HTTP API of a Nomad agent: http://host:port,
	// https://host:port or unix:///path (NOMAD_ADDR).
	Address string
	// Region is the region of a job whose spec names none; empty: the
	// agent's (NOMAD_REGION).
	Region string
	// Namespace is the namespace of a job whose spec names none; empty:
	// "default" (NOMAD_NAMESPACE).
	Namespace string
	// Token is the ACL token's secret ID (NOMAD_TOKEN). It needs the
	// dispatch-job, read-job and list-jobs capabilities in every namespace
	// the jobs use (and submit-job for Stop); CheckVersion also needs
	// node:read or agent:read.
	Token string
	TLS   TLSConfig
	// CallTimeout bounds each HTTP call's exchange with Nomad, from when
	// the call has its slot among those in flight (MaxCalls): the wait
	// for a slot counts against the request's deadline only. The Go
	// client sets none of its own: without it a call to a hung agent
	// never returns.
	CallTimeout time.Duration
	// RequestTimeout bounds a Client method, its retries included, when
	// its context's deadline is later. Keep it below the launcher's
	// MaxCallLatency (10 s by default) by the time Nomad may still take to
	// apply a call the client gave up on.
	RequestTimeout time.Duration
	// RetryBackoffMin and RetryBackoffMax bound the wait between attempts
	// of a call whose outcome is unknown; it doubles from the first to
	// the second, with jitter, and no attempt starts past the deadline.
	RetryBackoffMin time.Duration
	RetryBackoffMax time.Duration
	// JobGCThreshold is the Nomad servers' job_gc_threshold: how long
	// Nomad keeps a finished child, and so its idempotency token.
	JobGCThreshold time.Duration
	// HorizonMargin is taken off JobGCThreshold to give the memory
	// horizon (MemoryHorizon): slack for the GC's own timing and for
	// clocks. It must be smaller than JobGCThreshold.
	HorizonMargin time.Duration
}

// TLSConfig is the TLS of the HTTP API, as the nomad CLI takes it.
type TLSConfig struct {
	// CACert is a PEM file of the CA that signed the agent's certificate
	// (NOMAD_CACERT).
	CACert string
	// ClientCert and ClientKey are PEM files of the client's certificate
	// and key, both or neither (NOMAD_CLIENT_CERT, NOMAD_CLIENT_KEY).
	ClientCert string
	ClientKey  string
	// ServerName is the name checked in the agent's certificate
	// (NOMAD_TLS_SERVER_NAME).
	ServerName string
	// SkipVerify turns certificate verification off (NOMAD_SKIP_VERIFY).
	SkipVerify bool
}

// Defaults.
const (
	DefaultAddress         = "http://127.0.0.1:4646"
	DefaultCallTimeout     = 5 * time.Second
	DefaultRequestTimeout  = 8 * time.Second
	DefaultRetryBackoffMin = 100 * time.Millisecond
	DefaultRetryBackoffMax = 2 * time.Second
	// DefaultJobGCThreshold is Nomad's own default job_gc_threshold.
	DefaultJobGCThreshold = 4 * time.Hour
	DefaultHorizonMargin  = 15 * time.Minute
)

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("nomad: invalid config")

// DefaultConfig returns the defaults: the local agent, no ACL token, no
// TLS.
func DefaultConfig() Config {
	return Config{
		Address:         DefaultAddress,
		CallTimeout:     DefaultCallTimeout,
		RequestTimeout:  DefaultRequestTimeout,
		RetryBackoffMin: DefaultRetryBackoffMin,
		RetryBackoffMax: DefaultRetryBackoffMax,
		JobGCThreshold:  DefaultJobGCThreshold,
		HorizonMargin:   DefaultHorizonMargin,
	}
}

// ConfigFromEnv returns DefaultConfig overridden by the variables the
// nomad CLI reads: NOMAD_ADDR, NOMAD_REGION, NOMAD_NAMESPACE, NOMAD_TOKEN,
// NOMAD_CACERT, NOMAD_CLIENT_CERT, NOMAD_CLIENT_KEY, NOMAD_TLS_SERVER_NAME
// and NOMAD_SKIP_VERIFY. An unset or empty variable leaves the default. The
// result is validated.
func ConfigFromEnv() (Config, error) {
	c := DefaultConfig()
	for _, v := range []struct {
		name string
		dst  *string
	}{
		{"NOMAD_ADDR", &c.Address},
		{"NOMAD_REGION", &c.Region},
		{"NOMAD_NAMESPACE", &c.Namespace},
		{"NOMAD_TOKEN", &c.Token},
		{"NOMAD_CACERT", &c.TLS.CACert},
		{"NOMAD_CLIENT_CERT", &c.TLS.ClientCert},
		{"NOMAD_CLIENT_KEY", &c.TLS.ClientKey},
		{"NOMAD_TLS_SERVER_NAME", &c.TLS.ServerName},
	} {
		if s := os.Getenv(v.name); s != "" {
			*v.dst = s
		}
	}
	if s := os.Getenv("NOMAD_SKIP_VERIFY"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return Config{}, fmt.Errorf("%w: NOMAD_SKIP_VERIFY=%q is not a boolean (true, false, 1, 0)", ErrConfig, s)
		}
		c.TLS.SkipVerify = b
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks c, and says what is wrong in terms of the setting (and
// its NOMAD_* variable).
func (c Config) Validate() error {
	if err := validAddress(c.Address); err != nil {
		return err
	}
	for _, f := range []struct{ what, v string }{
		{"region (NOMAD_REGION)", c.Region}, {"namespace (NOMAD_NAMESPACE)", c.Namespace},
		{"token (NOMAD_TOKEN)", c.Token}, {"TLS server name (NOMAD_TLS_SERVER_NAME)", c.TLS.ServerName},
	} {
		if strings.TrimSpace(f.v) != f.v || strings.ContainsFunc(f.v, isControl) {
			return fmt.Errorf("%w: %s %q has surrounding spaces or control characters", ErrConfig, f.what, f.v)
		}
	}
	switch {
	case c.Namespace == "*":
		// Nomad reads "*" as every namespace for a listing only: a
		// dispatch looks the parent up in a namespace named "*" and is
		// refused, and a look-up would list every namespace's children.
		return fmt.Errorf("%w: namespace (NOMAD_NAMESPACE) %q is Nomad's wildcard, which cannot dispatch: name one namespace, or none for \"default\"", ErrConfig, c.Namespace)
	case (c.TLS.ClientCert == "") != (c.TLS.ClientKey == ""):
		return fmt.Errorf("%w: a client certificate needs both its file and its key (NOMAD_CLIENT_CERT=%q, NOMAD_CLIENT_KEY=%q)",
			ErrConfig, c.TLS.ClientCert, c.TLS.ClientKey)
	case c.CallTimeout <= 0 || c.RequestTimeout <= 0:
		return fmt.Errorf("%w: CallTimeout %v and RequestTimeout %v must be positive", ErrConfig, c.CallTimeout, c.RequestTimeout)
	case c.RetryBackoffMin <= 0 || c.RetryBackoffMax < c.RetryBackoffMin:
		return fmt.Errorf("%w: retry backoff [%v, %v] must be positive and ordered", ErrConfig, c.RetryBackoffMin, c.RetryBackoffMax)
	case c.JobGCThreshold <= 0:
		return fmt.Errorf("%w: JobGCThreshold %v must be positive (Nomad's job_gc_threshold, 4h by default)", ErrConfig, c.JobGCThreshold)
	case c.HorizonMargin < 0 || c.HorizonMargin >= c.JobGCThreshold:
		return fmt.Errorf("%w: HorizonMargin %v leaves nothing of JobGCThreshold %v", ErrConfig, c.HorizonMargin, c.JobGCThreshold)
	}
	return nil
}

func validAddress(addr string) error {
	u, err := url.Parse(addr)
	if err != nil {
		return fmt.Errorf("%w: address (NOMAD_ADDR) %q: %v; want http://host:port, https://host:port or unix:///path (the scheme is required)", ErrConfig, addr, err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("%w: address (NOMAD_ADDR) %q has no host", ErrConfig, addr)
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("%w: address (NOMAD_ADDR) %q must be scheme://host:port, without a path or query", ErrConfig, addr)
		}
	case "unix":
		if u.Path == "" {
			return fmt.Errorf("%w: address (NOMAD_ADDR) %q names no socket", ErrConfig, addr)
		}
	default:
		return fmt.Errorf("%w: address (NOMAD_ADDR) %q: the scheme must be http, https or unix", ErrConfig, addr)
	}
	return nil
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f }

// MemoryHorizon is how long Nomad is sure to remember a dispatch's token:
// JobGCThreshold less HorizonMargin. The server gives it to the launcher
// (launcher.Config.MemoryHorizon). It assumes no operator forces a GC
// (`nomad system gc`, a purge) meanwhile: that forgets tokens at once.
func (c Config) MemoryHorizon() time.Duration { return c.JobGCThreshold - c.HorizonMargin }
