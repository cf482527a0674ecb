package server

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ReloadTLS reads the TLS files again, as the server's SIGHUP asks: the
// replica's (tls.ca_file, tls.cert_file, tls.key_file) and the Nomad
// client's (nomad.ca_file, nomad.cert_file, nomad.key_file), at the
// paths the replica started with. Files that pass the checks of the
// start are used by the handshakes that start after (replicas', API
// clients', calls to Nomad); connections open go on as they are, but
// for replica-to-replica ones whose other end the CAs reloaded no
// longer trust, which are closed (retrust). Files
// that fail are refused: the replica keeps what it had, says why in its
// log and counts it (paxcron_config_reloads_total), and serves on. The
// error joins the refusals, nil when none. Every other setting is read
// only at start.
func (s *Server) ReloadTLS() error {
	s.reloading.Lock()
	defer s.reloading.Unlock()
	var errs []error // one per set of files reloaded, nil for those taken
	if s.cfg.TLS != nil {
		errs = append(errs, s.reloadReplicaTLS(time.Now()))
	}
	if t := s.cfg.Nomad.TLS; s.nomad != nil && (t.CACert != "" || t.ClientCert != "") {
		errs = append(errs, s.reloadNomadTLS())
	}
	if len(errs) == 0 {
		s.log.Info("nothing to reload: neither this replica nor its Nomad client has TLS files (a reload reads only those)")
	}
	return errors.Join(errs...)
}

func (s *Server) reloadReplicaTLS(now time.Time) error {
	m, err := readTLS(s.cfg.TLS, now)
	if err != nil {
		s.metrics.reloads.WithLabelValues("tls", "failed").Inc()
		s.log.Error("reloading this replica's TLS files failed: it keeps presenting and trusting those it read before; "+
			"fix the files and reload again (SIGHUP)", "err", err)
		return fmt.Errorf("server: reloading the TLS files: %w", err)
	}
	old := s.tlsNow.Swap(m)
	s.metrics.reloads.WithLabelValues("tls", "ok").Inc()
	s.replicaCert.poke()
	casChanged := !slices.EqualFunc(old.cas, m.cas, (*x509.Certificate).Equal)
	if old.info.leaf.Equal(m.info.leaf) && !casChanged {
		s.log.Info("this replica's TLS files reloaded, unchanged", "cert_file", s.cfg.TLS.CertFile, "ca_file", s.cfg.TLS.CAFile)
	} else {
		s.log.Info("this replica's TLS files reloaded: new connections use them, those open go on unless the CAs no longer trust the other end",
			"certificate", describeCert(m.info.leaf), "before", describeCert(old.info.leaf),
			"chain_expires_at", m.info.expires.UTC().Format(time.RFC3339),
			"cas", caSubjects(m.cas), "cas_before", caSubjects(old.cas))
	}
	if casChanged {
		s.retrust(m)
	}
	s.warnCert(now)
	return nil
}

func (s *Server) reloadNomadTLS() error {
	t := s.cfg.Nomad.TLS
	r, err := s.nomad.ReloadTLS()
	if err != nil {
		s.metrics.reloads.WithLabelValues("nomad", "failed").Inc()
		s.log.Error("reloading the Nomad client's TLS files failed: calls to Nomad go on with those read before; "+
			"fix the files and reload again (SIGHUP)", "err", err)
		return err
	}
	s.metrics.reloads.WithLabelValues("nomad", "ok").Inc()
	s.noteNomadCert()
	if !r.CAsChanged && r.NewCert.Equal(r.OldCert) { // Equal takes nil for none
		s.log.Info("the Nomad client's TLS files reloaded, unchanged", "cert_file", t.ClientCert, "ca_file", t.CACert)
		return nil
	}
	s.log.Info("the Nomad client's TLS files reloaded: new calls to Nomad use them, those under way go on",
		"certificate", describeNomadCert(r.NewCert), "before", describeNomadCert(r.OldCert),
		"ca_file", t.CACert, "cas_changed", r.CAsChanged)
	return nil
}

// caSubjects names the CAs of a CA file in a log line.
func caSubjects(cas []*x509.Certificate) string {
	names := make([]string, len(cas))
	for i, ca := range cas {
		names[i] = fmt.Sprintf("%q", ca.Subject)
	}
	return strings.Join(names, ", ")
}

// describeNomadCert names the Nomad client's certificate, if any.
func describeNomadCert(c *x509.Certificate) string {
	if c == nil {
		return "none"
	}
	return describeCert(c)
}
