package nomad

import (
	"bytes"
	"crypto/tls"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paxcron/internal/testcert"
)

// tlsNomad is a Nomad API over TLS that requires a client certificate
// from clientCA: it records the serial of the one each call presented,
// and presents the certificate last given to serve.
type tlsNomad struct {
	srv    *httptest.Server
	config atomic.Pointer[tls.Config]
	mu     sync.Mutex
	seen   []*big.Int
}

func startTLSNomad(t *testing.T, serverCA, clientCA *testcert.CA) *tlsNomad {
	t.Helper()
	n := &tlsNomad{}
	n.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.seen = append(n.seen, r.TLS.PeerCertificates[0].SerialNumber)
		n.mu.Unlock()
		reply(w, http.StatusOK, map[string]any{})
	}))
	n.serve(t, serverCA, clientCA)
	n.srv.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return n.config.Load(), nil }}
	n.srv.StartTLS()
	t.Cleanup(n.srv.Close)
	return n
}

// serve makes new connections present a certificate serverCA signs and
// require one clientCA signs.
func (n *tlsNomad) serve(t *testing.T, serverCA, clientCA *testcert.CA) {
	t.Helper()
	n.config.Store(&tls.Config{
		Certificates: []tls.Certificate{serverCA.Issue(t, testcert.Leaf{Name: "nomad"}).TLS()},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: clientCA.Pool(), MinVersion: tls.VersionTLS12,
	})
}

// call makes one call through c and returns the serial of the client
// certificate Nomad saw.
func (n *tlsNomad) call(t *testing.T, c *Client) (*big.Int, error) {
	t.Helper()
	var out map[string]any
	if _, err := c.API().Raw().Query("/v1/agent/self", &out, nil); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen[len(n.seen)-1], nil
}

// nomadTLSFiles writes the client's TLS files into dir: the CA file of
// serverCA and a client certificate clientCA signs, whose serial it
// returns.
func nomadTLSFiles(t *testing.T, dir string, serverCA, clientCA *testcert.CA) *big.Int {
	t.Helper()
	issued := clientCA.Issue(t, testcert.Leaf{Name: "paxcron"})
	cert, key := issued.PEM(t)
	for name, b := range map[string][]byte{"ca.pem": serverCA.PEM(), "cert.pem": cert, "key.pem": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return issued.Serial
}

// tlsConfig is a client's config for address, with the TLS files in dir.
func tlsConfig(address, dir string) Config {
	cfg := DefaultConfig()
	cfg.Address = address
	cfg.TLS = TLSConfig{CACert: filepath.Join(dir, "ca.pem"), ClientCert: filepath.Join(dir, "cert.pem"), ClientKey: filepath.Join(dir, "key.pem")}
	return cfg
}

func tlsClient(t *testing.T, address, dir string) *Client {
	t.Helper()
	c, err := New(tlsConfig(address, dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// startTLSNomadAndClient starts a TLS Nomad stand-in whose server and
// client certificates come from two CAs, writes a client's files into
// dir, and makes a client of them: the CAs, the stand-in, dir, the
// serial of the client certificate written, and the client.
func startTLSNomadAndClient(t *testing.T) (serverCA, clientCA *testcert.CA, n *tlsNomad, dir string, serial *big.Int, c *Client) {
	t.Helper()
	serverCA = testcert.NewCA(t, "nomad CA", time.Now().Add(24*time.Hour))
	clientCA = testcert.NewCA(t, "nomad client CA", time.Now().Add(24*time.Hour))
	n = startTLSNomad(t, serverCA, clientCA)
	dir = t.TempDir()
	serial = nomadTLSFiles(t, dir, serverCA, clientCA)
	return serverCA, clientCA, n, dir, serial, tlsClient(t, n.srv.URL, dir)
}

// After ReloadTLS the calls to Nomad present the new client certificate
// (the connection kept alive with the old one is not used again), and
// verify Nomad's against the new CA file; ReloadTLS says what changed.
func TestReloadTLSPresentsTheNewFiles(t *testing.T) {
	serverCA, clientCA, n, dir, first, c := startTLSNomadAndClient(t)
	if got, err := n.call(t, c); err != nil || got.Cmp(first) != 0 {
		t.Fatalf("the first call presented %x (%v), want %x", got, err, first)
	}

	renewed := nomadTLSFiles(t, dir, serverCA, clientCA)
	r, err := c.ReloadTLS()
	if err != nil {
		t.Fatal(err)
	}
	if r.OldCert.SerialNumber.Cmp(first) != 0 || r.NewCert.SerialNumber.Cmp(renewed) != 0 || r.CAsChanged {
		t.Errorf("ReloadTLS says %x -> %x, CAs changed %v; want %x -> %x, CAs unchanged",
			r.OldCert.SerialNumber, r.NewCert.SerialNumber, r.CAsChanged, first, renewed)
	}
	if got, err := n.call(t, c); err != nil || got.Cmp(renewed) != 0 {
		t.Errorf("after the reload a call presented %x (%v), want %x", got, err, renewed)
	}

	// Nomad moves to a certificate from another CA: refused until the
	// CA file that holds it is reloaded.
	newServerCA := testcert.NewCA(t, "nomad new CA", time.Now().Add(24*time.Hour))
	n.serve(t, newServerCA, clientCA)
	n.srv.CloseClientConnections()
	if _, err := n.call(t, c); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a call to Nomad presenting a certificate of a CA not in the CA file: %v, want a certificate error", err)
	}
	moved := nomadTLSFiles(t, dir, newServerCA, clientCA)
	if r, err := c.ReloadTLS(); err != nil || !r.CAsChanged {
		t.Fatalf("reloading the new CA file: %v, CAs changed %v", err, r.CAsChanged)
	}
	if got, err := n.call(t, c); err != nil || got.Cmp(moved) != 0 {
		t.Errorf("after reloading the new CA a call presented %x (%v), want %x", got, err, moved)
	}
}

// Files that do not load are refused, naming them and the cause, and the
// client goes on with those it had, on new connections too.
func TestReloadTLSKeepsTheFilesBeforeOnError(t *testing.T) {
	serverCA, clientCA, n, dir, kept, c := startTLSNomadAndClient(t)
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	type badFiles struct {
		name string
		set  func()
		want []string
	}
	cases := []badFiles{
		{"a certificate file that is not PEM", func() { write("cert.pem", []byte("not a certificate")) },
			[]string{filepath.Join(dir, "cert.pem"), "failed to find any PEM data in certificate input"}},
		{"a key of another certificate", func() {
			nomadTLSFiles(t, dir, serverCA, clientCA)
			_, key := clientCA.Issue(t, testcert.Leaf{}).PEM(t)
			write("key.pem", key)
		}, []string{filepath.Join(dir, "key.pem"), "private key does not match public key"}},
		{"no CA file", func() {
			nomadTLSFiles(t, dir, serverCA, clientCA)
			os.Remove(filepath.Join(dir, "ca.pem"))
		}, []string{filepath.Join(dir, "ca.pem"), "no such file"}},
	}
	for _, bad := range badCAFiles(t, serverCA) {
		cases = append(cases, badFiles{bad.name, func() {
			nomadTLSFiles(t, dir, serverCA, clientCA)
			write("ca.pem", bad.pem)
		}, []string{filepath.Join(dir, "ca.pem"), bad.want}})
	}
	for _, tc := range cases {
		tc.set()
		_, err := c.ReloadTLS()
		if err == nil {
			t.Fatalf("%s: the reload was taken", tc.name)
		}
		for _, want := range append(tc.want, "the files read before are kept") {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error does not say %q: %v", tc.name, want, err)
			}
		}
		n.srv.CloseClientConnections()
		if got, err := n.call(t, c); err != nil || got.Cmp(kept) != 0 {
			t.Errorf("%s: a call after the refused reload presented %x (%v), want %x", tc.name, got, err, kept)
		}
	}
}

// badCAFile is a CA file internal/cafile refuses, and what it says.
type badCAFile struct {
	name string
	pem  []byte
	want string
}

// badCAFiles are CA files that Nomad's library read without a word, or
// refused naming no file: a bundle whose seam lost a line break (it
// skipped the two certificates there, and read ca's after), a file that
// is not PEM, and a key where the CA belongs.
func badCAFiles(t *testing.T, ca *testcert.CA) []badCAFile {
	other := testcert.NewCA(t, "nomad old CA", time.Now().Add(24*time.Hour))
	third := testcert.NewCA(t, "nomad next CA", time.Now().Add(24*time.Hour))
	_, key := ca.Issue(t, testcert.Leaf{}).PEM(t)
	seamless := append(bytes.TrimSuffix(other.PEM(), []byte("\n")), third.PEM()...)
	return []badCAFile{
		{"a bundle missing a line break", append(seamless, ca.PEM()...), "concatenated without a line break"},
		{"a CA file that is not PEM", []byte("not a certificate\n"), "holds no PEM certificate"},
		{"a key in place of the CA", key, "not a CERTIFICATE"},
	}
}

// A CA file that internal/cafile refuses is refused at start too, naming
// the file and the cause.
func TestNewRefusesABadCAFile(t *testing.T) {
	serverCA, clientCA := testcert.NewCA(t, "nomad CA", time.Now().Add(24*time.Hour)), testcert.NewCA(t, "nomad client CA", time.Now().Add(24*time.Hour))
	dir := t.TempDir()
	for _, bad := range badCAFiles(t, serverCA) {
		nomadTLSFiles(t, dir, serverCA, clientCA)
		if err := os.WriteFile(filepath.Join(dir, "ca.pem"), bad.pem, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := New(tlsConfig("https://127.0.0.1:4646", dir))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), filepath.Join(dir, "ca.pem")) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: New says %v, want ErrConfig naming the file and saying %q", bad.name, err, bad.want)
		}
	}
}
