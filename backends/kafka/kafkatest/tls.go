package kafkatest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The broker's SASL_SSL listener serves a certificate made for each test
// broker: a throwaway CA signs a server certificate for 127.0.0.1 and
// localhost. scripts/kafka.sh adds the listener when DATA_DIR/tls holds
// server.pem, a PEM keystore (the PKCS#8 private key, then the chain),
// which Kafka reads with ssl.keystore.type=PEM.
const (
	tlsDir        = "tls"
	tlsCAFile     = "ca.pem"
	tlsServerFile = "server.pem"
)

// writeTLS makes the CA and the server certificate under dir/tls.
func writeTLS(dir string) error {
	d := filepath.Join(dir, tlsDir)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return err
	}
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dlqctl kafkatest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("kafkatest: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	srvKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("kafkatest: server certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		return err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	store := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	store = append(store, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER})...)
	store = append(store, caPEM...)
	if err := os.WriteFile(filepath.Join(d, tlsCAFile), caPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d, tlsServerFile), store, 0o600)
}
