package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"paxcron/internal/testcert"
)

// The transport of forwarded requests dials with the TLS config its
// dialTLS gives at each dial (a CA added between two dials is trusted
// by the second), still checks that the certificate names the host
// dialed, and offers HTTP/2 as http.Transport does when it runs TLS
// itself: an API serving h2 gets it, one serving HTTP/1.1 alone that.
func TestForwardingDialsWithTheTLSOfEachDial(t *testing.T) {
	oldCA := testcert.NewCA(t, "paxcron CA", time.Now().Add(time.Hour))
	newCA := testcert.NewCA(t, "paxcron CA", time.Now().Add(2*time.Hour))
	serve := func(h2 bool, leaf testcert.Leaf) *httptest.Server {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.EnableHTTP2 = h2
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{newCA.Issue(t, leaf).TLS()}, MinVersion: tls.VersionTLS12}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv
	}
	dialer := func(roots *x509.CertPool) *tls.Config {
		return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	var now atomic.Pointer[tls.Config]
	now.Store(dialer(oldCA.Pool()))
	tr := newProxyTransport(now.Load, newForwardConns())
	t.Cleanup(tr.CloseIdleConnections)
	get := func(url string) (*http.Response, error) {
		resp, err := (&http.Client{Transport: tr}).Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}

	h2 := serve(true, testcert.Leaf{Name: "replica-2"})
	var unknown x509.UnknownAuthorityError
	if _, err := get(h2.URL); !errors.As(err, &unknown) {
		t.Fatalf("a replica whose CA the dialer does not trust: %v, want a certificate from an unknown CA", err)
	}
	now.Store(dialer(newCA.Pool()))
	if resp, err := get(h2.URL); err != nil || resp.ProtoMajor != 2 {
		t.Fatalf("once the dialer trusts its CA: %v, %+v; want HTTP/2, as the server offers it", err, resp)
	}
	if resp, err := get(serve(false, testcert.Leaf{Name: "replica-3"}).URL); err != nil || resp.ProtoMajor != 1 {
		t.Fatalf("a replica serving HTTP/1.1 alone: %v, %+v; want HTTP/1.1", err, resp)
	}
	var host x509.HostnameError
	if _, err := get(serve(false, testcert.Leaf{Name: "replica-4", DNS: []string{"replica-4.example"}}).URL); !errors.As(err, &host) {
		t.Fatalf("a replica whose certificate does not name the address dialed: %v, want a host name error", err)
	}
	if now.Load().ServerName != "" || now.Load().NextProtos != nil {
		t.Errorf("the config dialTLS gave was changed: %+v; each dial must work on a clone", now.Load())
	}
}
