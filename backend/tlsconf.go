package backend

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSOptions are a source URL's TLS query options: tls_ca (a PEM file of
// the certificates to trust instead of the system's), tls_insecure (no
// verification, only when the URL asks) and tls_server_name (the name to
// verify instead of the host's).
type TLSOptions struct {
	CA         string
	Insecure   bool
	ServerName string
}

// Config is the TLS 1.2+ setting the options ask for. host is the name to
// verify when tls_server_name gives none ("" lets the client use each
// address's host). Its error names the option; the caller adds the source.
func (o TLSOptions) Config(host string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.Insecure, ServerName: o.ServerName}
	if c.ServerName == "" {
		c.ServerName = host
	}
	if o.CA != "" {
		pool, err := LoadCA(o.CA)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	return c, nil
}

// LoadCA reads the PEM certificates of a tls_ca file into a pool.
func LoadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls_ca: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls_ca %s: no PEM certificate in it", path)
	}
	return pool, nil
}
