// Package cafile reads a PEM file of CA certificates, as the server's
// tls.ca_file and the client's -ca-cert name: one CA, or several in one
// file (while moving to a new CA, the old and the new).
//
// It is stricter than x509.CertPool.AppendCertsFromPEM, which skips what
// it cannot read: files concatenated with no line break between them (an
// END line running into the next BEGIN) lose both of those
// certificates, and with others read the pool would quietly lack a CA.
// Found in review (the operator's procedures, TLS): the bundle a CA move
// starts with is made exactly that way. Here every BEGIN line must give
// a certificate, or the file is refused, saying which.
package cafile

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// Read reads the CA certificates of the PEM file at path.
func Read(path string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse reads the CA certificates of b, a PEM file named name (in
// errors). Text around the blocks (comments, as some bundles hold) is
// ignored.
func Parse(name string, b []byte) ([]*x509.Certificate, error) {
	var cas []*x509.Certificate
	for rest := b; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s: block %d is a %s, not a CERTIFICATE", name, len(cas)+1, block.Type)
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %w", name, len(cas)+1, err)
		}
		cas = append(cas, ca)
	}
	if begins := bytes.Count(b, []byte("-----BEGIN ")); begins != len(cas) {
		return nil, fmt.Errorf("%s holds %d BEGIN lines but %d certificates could be read: "+
			"files concatenated without a line break between them? (each END line must end its line)", name, begins, len(cas))
	}
	if len(cas) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", name)
	}
	return cas, nil
}

// Pool is a pool of the CA certificates of the PEM file at path.
func Pool(path string) (*x509.CertPool, error) {
	cas, err := Read(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	return pool, nil
}
