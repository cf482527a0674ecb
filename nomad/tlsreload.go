package nomad

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/hashicorp/nomad/api"

	"paxcron/internal/cafile"
)

// The client's TLS files are read again by ReloadTLS (the server's
// SIGHUP): Nomad's client certificates are renewed as often as a
// replica's, and a restart for each was the only way (found in review,
// the operator's procedures, TLS). The Go API client reads its TLS
// files once, into the *http.Transport it is given; the Client gives it
// a transport that forwards to one it can replace, so that a reload
// needs no new API client and the calls under way finish on the
// connections they hold.

// reloadableTransport sends each call through the *http.Transport last
// stored.
type reloadableTransport struct {
	current atomic.Pointer[http.Transport]
}

func (r *reloadableTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.current.Load().RoundTrip(req)
}

// CloseIdleConnections is what api.Client.Close calls through the
// http.Client.
func (r *reloadableTransport) CloseIdleConnections() { r.current.Load().CloseIdleConnections() }

// newTLSTransport is the pooled transport to cfg.Address with cfg's TLS
// files read, as the nomad CLI reads them (api.ConfigureTLS), and base,
// where the calls made outside the Go API client go (pooledHTTPClient).
// Errors name the files.
func newTLSTransport(cfg Config) (*http.Transport, string, error) {
	caPEM, err := readCAFile(cfg.TLS.CACert)
	if err != nil {
		return nil, "", err
	}
	client, base := pooledHTTPClient(cfg.Address)
	err = api.ConfigureTLS(client, &api.TLSConfig{
		CACertPEM: caPEM, ClientCert: cfg.TLS.ClientCert, ClientKey: cfg.TLS.ClientKey,
		TLSServerName: cfg.TLS.ServerName, Insecure: cfg.TLS.SkipVerify,
	})
	if err != nil {
		return nil, "", fmt.Errorf("the TLS files (ca_file %q, cert_file %q, key_file %q): %w",
			cfg.TLS.CACert, cfg.TLS.ClientCert, cfg.TLS.ClientKey, err)
	}
	return client.Transport.(*http.Transport), base, nil
}

// readCAFile reads the CA file at path ("": none, the system's CAs) and
// checks it with internal/cafile, for the API client to take its bytes
// (CACertPEM). Nomad's library reads CA files with
// x509.CertPool.AppendCertsFromPEM, which skips what it cannot read: a
// bundle concatenated with no line break lost two CAs quietly, and a
// file that was not PEM was refused as "Couldn't parse PEM", naming no
// file (found in review, TLS reload). Reading the bytes once, here,
// leaves no window for the file to change between the check and its
// use.
func readCAFile(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err == nil {
		_, err = cafile.Parse(path, b)
	}
	if err != nil {
		return nil, fmt.Errorf("the CA file (ca_file): %w", err)
	}
	return b, nil
}

// TLSReload is what a reload of the client's TLS files changed.
type TLSReload struct {
	// OldCert and NewCert are the client certificate presented before
	// and after (nil without one).
	OldCert, NewCert *x509.Certificate
	// CAsChanged: the CAs that Nomad's certificate is verified against
	// are not the ones before.
	CAsChanged bool
}

// ReloadTLS reads the Config's TLS files again (CACert, ClientCert,
// ClientKey), with the checks New makes. Once they pass, calls that
// start use them, on new connections; calls under way finish on theirs.
// If they fail, the client keeps what it had and the error names the
// files and the cause.
func (c *Client) ReloadTLS() (TLSReload, error) {
	tr, _, err := newTLSTransport(c.cfg)
	if err != nil {
		return TLSReload{}, fmt.Errorf("nomad: reloading %w; the files read before are kept", err)
	}
	old := c.calls.current.Swap(tr)
	// Idle connections made with the old files would be used no more:
	// close them now rather than when they time out.
	old.CloseIdleConnections()
	return TLSReload{OldCert: clientLeaf(old), NewCert: clientLeaf(tr),
		CAsChanged: !old.TLSClientConfig.RootCAs.Equal(tr.TLSClientConfig.RootCAs)}, nil
}

// ClientCertificate is the client certificate calls present now, with
// the chain its file holds; nil without one.
func (c *Client) ClientCertificate() *tls.Certificate {
	if certs := c.calls.current.Load().TLSClientConfig.Certificates; len(certs) > 0 {
		return &certs[0]
	}
	return nil
}

// clientLeaf is the client certificate tr presents, nil for none.
func clientLeaf(tr *http.Transport) *x509.Certificate {
	if certs := tr.TLSClientConfig.Certificates; len(certs) > 0 {
		if certs[0].Leaf != nil {
			return certs[0].Leaf
		}
		if leaf, err := x509.ParseCertificate(certs[0].Certificate[0]); err == nil {
			return leaf
		}
	}
	return nil
}
