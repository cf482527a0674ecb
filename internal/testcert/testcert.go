// Package testcert makes certificate authorities and certificates for
// tests: a CA valid until a given time, and leaves it signs for the hosts
// and uses a test names. Every key is a fresh P-256 key and every serial
// random, so two CAs of one name are still two CAs (a CA move's old and
// new). It is for tests only; nothing in a server or client imports it.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// CA is a certificate authority made in a test.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed CA named name, valid from an hour ago until
// notAfter.
func NewCA(t testing.TB, name string, notAfter time.Time) *CA {
	t.Helper()
	key := NewKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: NewSerial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key}
}

// PEM is the CA's certificate, PEM-encoded (with its final line break).
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Pool is a pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf is what a certificate the CA signs says: its name, the hosts it
// is valid for (127.0.0.1 when none), until when (a year from now when
// zero), and for what (server and client authentication when nil).
type Leaf struct {
	Name     string
	IPs      []net.IP
	DNS      []string
	NotAfter time.Time
	Usages   []x509.ExtKeyUsage
}

// Issued is a certificate the CA signed and its key.
type Issued struct {
	DER    []byte
	Key    *ecdsa.PrivateKey
	Serial *big.Int
}

// Issue signs a certificate as leaf says.
func (ca *CA) Issue(t testing.TB, leaf Leaf) Issued {
	t.Helper()
	key := NewKey(t)
	if leaf.IPs == nil && leaf.DNS == nil {
		leaf.IPs = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	if leaf.Usages == nil {
		leaf.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	if leaf.NotAfter.IsZero() {
		leaf.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: NewSerial(t), Subject: pkix.Name{CommonName: leaf.Name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: leaf.NotAfter,
		IPAddresses: leaf.IPs, DNSNames: leaf.DNS,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: leaf.Usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return Issued{DER: der, Key: key, Serial: tmpl.SerialNumber}
}

// TLS is the certificate as crypto/tls presents it.
func (c Issued) TLS() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.DER}, PrivateKey: c.Key}
}

// PEM is the certificate and its key, PEM-encoded, as a replica's
// tls.cert_file and tls.key_file hold them.
func (c Issued) PEM(t testing.TB) (certPEM, keyPEM []byte) {
	t.Helper()
	kder, err := x509.MarshalECPrivateKey(c.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.DER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// NewKey is a fresh P-256 key.
func NewKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// NewSerial is a random 127-bit serial number.
func NewSerial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
