package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"paxcron/internal/testcert"
)

// bundleCA is a CA made in the test: its certificate (PEM) and a server
// certificate for 127.0.0.1 it signed.
type bundleCA struct {
	pem    []byte
	server tls.Certificate
}

func newBundleCA(t *testing.T, name string) bundleCA {
	t.Helper()
	ca := testcert.NewCA(t, name, time.Now().Add(time.Hour))
	srv := ca.Issue(t, testcert.Leaf{Name: "replica", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return bundleCA{pem: ca.PEM(), server: srv.TLS()}
}

// During a CA move a client is given both CAs in one file (-ca-cert,
// PAXCRON_CACERT): it then trusts replicas presenting a certificate from
// either. A file that lost CAs to a missing line break between the
// concatenated files is refused, naming that, rather than trusting only
// some of them.
func TestClientCABundle(t *testing.T) {
	oldCA, newCA, third := newBundleCA(t, "paxcron CA"), newBundleCA(t, "paxcron CA"), newBundleCA(t, "another CA")
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	both := write("both.pem", slices.Concat(oldCA.pem, newCA.pem))
	for _, ca := range []bundleCA{oldCA, newCA} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jobs":[]}`))
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.server}}
		srv.StartTLS()
		c, err := NewClient(ClientConfig{Address: srv.URL, CACert: both})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Jobs(context.Background(), ReadOptions{}); err != nil {
			t.Errorf("a server whose certificate one of the two CAs signed: %v", err)
		}
		c.Close()
		srv.Close()
	}
	broken := write("broken.pem", slices.Concat(oldCA.pem, bytes.TrimSuffix(newCA.pem, []byte("\n")), third.pem))
	if _, err := NewClient(ClientConfig{Address: "https://127.0.0.1:1", CACert: broken}); err == nil || !strings.Contains(err.Error(), "line break") {
		t.Errorf("a bundle that lost two of its three CAs: %v, want an error naming a missing line break", err)
	}
}
