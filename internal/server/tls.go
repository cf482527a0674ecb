package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paxcron/internal/cafile"
)

// The replica's TLS files, read at start-up and again on Server.ReloadTLS
// (SIGHUP). Found in review (the operator's procedures, TLS): a
// certificate that peers would refuse (from a CA outside the CA file,
// expired, or not for client authentication) started anyway and cut the
// replica off with no line saying why on the side that dialed; and
// nothing said that a certificate in use was about to expire until
// connections failed. Renewing a certificate took a rolling restart,
// where Nomad, Consul and Vault reload theirs on SIGHUP.

const (
	// certExpiryWarning is how long before its certificate expires a
	// replica starts warning: time to renew it and roll it out.
	certExpiryWarning = 30 * 24 * time.Hour
	// certWarnEvery is how often the warning is repeated until then;
	// certExpiredEvery how often an expired certificate is said again.
	certWarnEvery    = 24 * time.Hour
	certExpiredEvery = time.Hour
)

// certInfo is what the replica knows of the certificate it presents.
type certInfo struct {
	file string
	leaf *x509.Certificate
	// expires is when the chain verified against the CA file stops
	// verifying: the earliest end of validity along it; expiring names
	// the certificate that ends then (the replica's own, or a CA's).
	expires  time.Time
	expiring string
}

// tlsMaterial is what the TLS files held when last read and checked:
// every handshake reads the one in Server.tlsNow when it starts, so a
// reload changes new handshakes and leaves the connections made alone.
type tlsMaterial struct {
	cert tls.Certificate
	cas  []*x509.Certificate
	pool *x509.CertPool
	info *certInfo
	// acceptor is the TLS server config of the Paxos transport:
	// mutual TLS against the CAs of the CA file.
	acceptor *tls.Config
	// dialer is the TLS client config this replica dials its peers with
	// (the Paxos transport, and the requests it forwards to their APIs):
	// it verifies them against the CAs of the CA file, and the dial sets
	// the host, on a clone, so that crypto/tls checks the name too.
	dialer *tls.Config
}

// readTLS reads the TLS files and checks, at now, that the certificate
// can work. Errors name the file and the cause.
func readTLS(f *TLSFiles, now time.Time) (*tlsMaterial, error) {
	certPEM, err := os.ReadFile(f.CertFile)
	if err != nil {
		return nil, fmt.Errorf("tls.cert_file: %w", err)
	}
	keyPEM, err := os.ReadFile(f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls.key_file: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.cert_file %s with tls.key_file %s: %w", f.CertFile, f.KeyFile, err)
	}
	cas, err := cafile.Read(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("tls.ca_file: %w", err)
	}
	info, err := checkCert(cert, cas, f, now)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	m := &tlsMaterial{cert: cert, cas: cas, pool: pool, info: info}
	m.acceptor = &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}
	m.dialer = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool,
		// Dialing, present the certificate even when its CA is not among
		// those the peer asks for: crypto/tls would send none, and the
		// peer could only say that none came, not whose it refused and
		// why.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &m.cert, nil },
	}
	return m, nil
}

// loadTLS reads the TLS files at start-up and makes the TLS configs of
// the API and (by transportTLS) of the Paxos transport's acceptor: each
// takes its certificate and CAs from tlsNow at every handshake, as do
// this replica's dials (dialerTLS).
func (s *Server) loadTLS() error {
	f := s.cfg.TLS
	if f == nil {
		return nil
	}
	m, err := readTLS(f, time.Now())
	if err != nil {
		return fmt.Errorf("%w: tls: %w", ErrConfig, err)
	}
	s.tlsNow.Store(m)
	s.replicaCert = s.replicaCertWatch()
	s.apiTLS = &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &s.tlsNow.Load().cert, nil }}
	return nil
}

// dialerTLS is the TLS config this replica dials its peers with now (the
// files loaded last); only with TLS. Each dial (the Paxos transport's,
// and those of forwarded requests) clones it and sets the host dialed:
// crypto/tls checks the chain against its RootCAs and the name, an IP
// address included, as with a config fixed at start, and a CA a reload
// adds or drops counts from the next dial on.
func (s *Server) dialerTLS() *tls.Config { return s.tlsNow.Load().dialer }

// transportTLS is the Paxos transport's acceptor: mutual TLS between
// replicas, with the files loaded last.
func (s *Server) transportTLS() *tls.Config {
	if s.apiTLS == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequireAndVerifyClientCert,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.tlsNow.Load().acceptor, nil }}
}

// checkCert checks, at now, that the certificate verifies against the
// CAs as both a server's (peers and API clients dial this replica) and a
// client's (it dials its peers), as its peers will check it: a replica
// whose CA file holds what theirs does would otherwise be refused by
// every peer. It names the certificate and the cause.
func checkCert(cert tls.Certificate, cas []*x509.Certificate, f *TLSFiles, now time.Time) (*certInfo, error) {
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, err
		}
	}
	name := fmt.Sprintf("the certificate in %s (%s)", f.CertFile, describeCert(leaf))
	if !now.Before(leaf.NotAfter) {
		return nil, fmt.Errorf("%s expired at %s: peers and API clients refuse it; issue a new one",
			name, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, ca := range cas {
		roots.AddCert(ca)
	}
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%s: the chain after it: %w", name, err)
		}
		inter.AddCert(c)
	}
	// A certificate not valid yet is warned of at start (clocks), not
	// refused: its chain is checked as of when it becomes valid.
	at := now
	if at.Before(leaf.NotBefore) {
		at = leaf.NotBefore
	}
	var chain []*x509.Certificate
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		chains, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{use}})
		if err != nil {
			return nil, certRefused(name, f.CAFile, cas, use, err)
		}
		chain = chains[0]
	}
	info := &certInfo{file: f.CertFile, leaf: leaf, expires: leaf.NotAfter, expiring: fmt.Sprintf("%q", leaf.Subject)}
	for _, c := range chain[1:] {
		if c.NotAfter.Before(info.expires) {
			info.expires, info.expiring = c.NotAfter, fmt.Sprintf("the CA %q, of its chain", c.Subject)
		}
	}
	return info, nil
}

// certRefused says why a replica's own certificate does not verify.
func certRefused(name, caFile string, cas []*x509.Certificate, use x509.ExtKeyUsage, err error) error {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		var held []string
		for _, ca := range cas {
			held = append(held, fmt.Sprintf("%q", ca.Subject))
		}
		return fmt.Errorf("%s is not signed by a CA in %s (it holds %s), so peers whose CA file holds the same refuse it: "+
			"give every replica a CA file holding its CA first (to move to a new CA: both CAs in every replica's CA file, then the new certificates): %w",
			name, caFile, strings.Join(held, ", "), err)
	case errors.As(err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
		return fmt.Errorf("%s is not for TLS %s authentication (its extended key usage): a replica presents it both as a server "+
			"(peers and API clients dial it) and as a client (it dials its peers), so it needs both: %w", name, usageName(use), err)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return fmt.Errorf("%s: a CA certificate of its chain expired, or is not valid yet: %w", name, err)
	}
	return fmt.Errorf("%s does not verify against %s: %w", name, caFile, err)
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageClientAuth {
		return "client"
	}
	return "server"
}

// describeCert names a certificate in a log line or an error.
func describeCert(c *x509.Certificate) string {
	return fmt.Sprintf("subject %q, issuer %q, valid %s to %s", c.Subject, c.Issuer,
		c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
}

// warnCert logs what is odd, not fatal, about the certificate loaded: not
// valid yet, or not naming a host this replica advertises (peers dialing
// that host refuse it; they may dial another name, which only they know).
func (s *Server) warnCert(now time.Time) {
	cert := s.tlsNow.Load().info
	leaf := cert.leaf
	if now.Before(leaf.NotBefore) {
		s.log.Warn("this replica's TLS certificate is not valid yet: until then peers and API clients refuse it (is a clock off?)",
			"cert_file", cert.file, "valid_from", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	for _, adv := range []struct{ what, addr string }{{"paxos", s.cfg.PaxosAdvertise}, {"http", s.cfg.HTTPAdvertise}} {
		host, _, err := net.SplitHostPort(adv.addr)
		if err != nil || host == "" || net.ParseIP(host).IsUnspecified() {
			continue
		}
		if err := leaf.VerifyHostname(host); err != nil {
			s.log.Warn("this replica's TLS certificate does not name the host it advertises: peers dialing "+adv.addr+" refuse it",
				"cert_file", cert.file, "advertised", adv.what, "err", err)
		}
	}
}

// certWatch is a certificate this replica presents whose expiry it warns
// of: its own (replicaCertWatch), or its Nomad client's (nomadCertWatch).
type certWatch struct {
	// what names the certificate in a log line; expired says what an
	// expired one stops, and refusedOnce who refuses it once it expires.
	what, expired, refusedOnce string
	// info is the certificate presented now; reloaded is poked when a
	// reload changes it.
	info     func() *certInfo
	reloaded chan struct{}
}

func (s *Server) replicaCertWatch() *certWatch {
	return &certWatch{what: "this replica's TLS certificate",
		expired: "peers and API clients refuse new connections with it; connections made before go on until they break, " +
			"and then this replica is cut off (launches stop once a majority is)",
		refusedOnce: "peers refuse new connections with it",
		info:        func() *certInfo { return s.tlsNow.Load().info }, reloaded: make(chan struct{}, 1)}
}

func (s *Server) nomadCertWatch() *certWatch {
	return &certWatch{what: "the Nomad client's TLS certificate",
		expired: "a Nomad that verifies client certificates refuses new connections with it, " +
			"and then calls to Nomad fail (launches with them)",
		refusedOnce: "a Nomad that verifies client certificates refuses new connections with it, and launches fail",
		info:        s.nomadCertNow.Load, reloaded: make(chan struct{}, 1)}
}

// noteNomadCert reads the Nomad client's certificate, when it has one,
// to watch its expiry: when it is read at start, or reloaded.
func (s *Server) noteNomadCert() {
	c := s.nomad.ClientCertificate()
	if c == nil {
		return
	}
	s.nomadCertNow.Store(clientCertInfo(c, s.cfg.Nomad.TLS.ClientCert))
	if s.nomadCert != nil {
		s.nomadCert.poke()
		return
	}
	s.nomadCert = s.nomadCertWatch()
	s.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paxcron_nomad_tls_certificate_expiry_timestamp_seconds",
		Help: "When the TLS client certificate this replica presents to Nomad expires (it, or a certificate of the chain its file holds; Unix seconds): renew it before, and reload it (SIGHUP). Only with nomad.cert_file."},
		func() float64 { return float64(s.nomadCertNow.Load().expires.Unix()) }))
}

// clientCertInfo is what the replica knows of its Nomad client's
// certificate c, read from file: it expires at the earliest end of
// validity of it and of the chain its file holds. The CAs that verify it
// are Nomad's to know (nomad.ca_file verifies Nomad's own certificate).
// A certificate of the chain that does not parse is left out: Nomad
// refuses it at the handshake, and the call says so.
func clientCertInfo(c *tls.Certificate, file string) *certInfo {
	var info *certInfo
	for _, der := range c.Certificate {
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			continue
		}
		if info == nil {
			info = &certInfo{file: file, leaf: cert, expires: cert.NotAfter, expiring: fmt.Sprintf("%q", cert.Subject)}
		} else if cert.NotAfter.Before(info.expires) {
			info.expires, info.expiring = cert.NotAfter, fmt.Sprintf("the CA %q, of its chain", cert.Subject)
		}
	}
	if info == nil {
		panic("server: the Nomad client's certificate does not parse, yet crypto/tls loaded it with its key")
	}
	return info
}

// poke tells the watch that the certificate changed.
func (w *certWatch) poke() {
	select {
	case w.reloaded <- struct{}{}:
	default: // it has one to read already
	}
}

// noteCertExpiry warns, at now, of a certificate that expires soon, and
// says so louder once it has.
func (s *Server) noteCertExpiry(now time.Time, w *certWatch) {
	cert := w.info()
	left := cert.expires.Sub(now)
	expires := cert.expires.UTC().Format(time.RFC3339)
	switch {
	case left <= 0:
		s.log.Error(w.what+" has expired: "+w.expired+". Issue a new certificate and reload it (SIGHUP), or restart this replica",
			"expired_at", expires, "certificate", cert.expiring, "cert_file", cert.file)
	case left <= certExpiryWarning:
		s.log.Warn(w.what+" expires in "+left.Round(time.Second).String()+
			": issue a new one and reload it (SIGHUP) before then; once it expires "+w.refusedOnce,
			"expires_at", expires, "certificate", cert.expiring, "cert_file", cert.file)
	}
}

// nextCertCheck is how long after now the certificate's expiry is looked
// at again: when the warning starts, daily while it lasts, at the expiry
// itself, and hourly after. At most a day: the wall clock may jump.
func nextCertCheck(now, expires time.Time) time.Duration {
	left := expires.Sub(now)
	switch {
	case left <= 0:
		return certExpiredEvery
	case left <= certExpiryWarning:
		return min(certWarnEvery, left+time.Second)
	}
	return min(certWarnEvery, left-certExpiryWarning+time.Second)
}

// watchCertExpiry logs the expiry of the certificate w watches as it
// nears, until the server stops; a reload starts it over with the new
// one.
func (s *Server) watchCertExpiry(w *certWatch) {
	for {
		now := time.Now()
		s.noteCertExpiry(now, w)
		t := time.NewTimer(nextCertCheck(now, w.info().expires))
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-w.reloaded:
			t.Stop()
		case <-t.C:
		}
	}
}

// explainTLS says, for a replica-to-replica handshake that failed in TLS,
// which certificate was refused and why, or "" when err is no such
// refusal. This side refused the other's certificate (the error names
// it), or the other side refused this one's (its alert says why; its
// log names the certificate).
func explainTLS(err error) string {
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) && len(cv.UnverifiedCertificates) > 0 {
		return "this replica refused the other replica's certificate (" + describeCert(cv.UnverifiedCertificates[0]) + "): " + certCause(cv.Err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return ""
	}
	switch op.Err.Error() {
	case tls.AlertError(48).Error(), tls.AlertError(116).Error(): // unknown_ca, certificate_required
		return "the other replica refused this replica's certificate: its CA file does not hold the CA that signed it"
	case tls.AlertError(45).Error(): // certificate_expired
		return "the other replica refused this replica's certificate: it has expired, or is not valid yet by that replica's clock"
	case tls.AlertError(42).Error(), tls.AlertError(46).Error(), tls.AlertError(43).Error(): // bad, unknown, unsupported
		return "the other replica refused this replica's certificate (its log says why)"
	}
	return ""
}

// certCause says why this replica refused a peer's certificate.
func certCause(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		return "it is not signed by a CA in this replica's CA file"
	case errors.As(err, &host):
		return "it does not name the host this replica dialed, " + host.Host
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "it has expired, or is not valid yet by this replica's clock"
	case errors.As(err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
		return "it is not for both TLS server and client authentication (its extended key usage)"
	}
	return "it does not verify"
}
