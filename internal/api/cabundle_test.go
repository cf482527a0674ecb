package api

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// bundleCA is a CA made in the test: its certificate (PEM) and a server
// certificate for 127.0.0.1 it signed.
type bundleCA struct {
	pem    []byte
	server tls.Certificate
}

func newBundleCA(t *testing.T, name string) bundleCA {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "replica"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return bundleCA{pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		server: tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}
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
