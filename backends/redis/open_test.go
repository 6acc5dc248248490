package redisstream

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/redis/redistest"
)

// assertNoSecret fails when secret shows in any of the texts.
func assertNoSecret(t *testing.T, secret string, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(s, secret) {
			t.Errorf("password %q leaked in %q", secret, s)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestConnectionRefused(t *testing.T) {
	addr := freeAddr(t)
	start := time.Now()
	_, err := Open(context.Background(), "redis://bob:hunter2-pass@"+addr+"/0?stream=dlq", Options{})
	if err == nil {
		t.Fatal("Open on a closed port succeeded")
	}
	var ce *backend.ConfigError
	if errors.As(err, &ce) {
		t.Errorf("connection refused is a ConfigError (exit 2): %v", err)
	}
	want := "redis://bob:xxxxx@" + addr + "/0?stream=dlq: cannot reach Redis"
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("err = %v, want it to contain %q and say refused", err, want)
	}
	assertNoSecret(t, "hunter2-pass", err.Error())
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Open took %s to give up", d)
	}
}

func TestRequirePass(t *testing.T) {
	const password = "s3cret-Pass-xyz"
	srv := redistest.Start(t, "--requirepass", password)
	ctx := context.Background()
	base := "redis://" + srv.Addr() + "/0?stream=dlq"

	cases := []struct {
		name string
		url  string
		opts Options
	}{
		{"no password", base, Options{}},
		{"wrong password in URL", "redis://:wrong-" + password + "@" + srv.Addr() + "/0?stream=dlq", Options{}},
		{"wrong password in options", base, Options{Password: "wrong-" + password}},
		// The URL's password wins over the one from the environment.
		{"URL beats options", "redis://:wrong-" + password + "@" + srv.Addr() + "/0?stream=dlq", Options{Password: password}},
	}
	for _, c := range cases {
		_, err := Open(ctx, c.url, c.opts)
		if err == nil {
			t.Errorf("%s: Open succeeded", c.name)
			continue
		}
		var ce *backend.ConfigError
		if errors.As(err, &ce) || !strings.Contains(err.Error(), "authentication failed") {
			t.Errorf("%s: err = %v, want a plain authentication error", c.name, err)
		}
		assertNoSecret(t, password, err.Error())
	}

	s := openStream(t, base, Options{Password: password})
	if _, err := s.Len(ctx); err != nil {
		t.Errorf("Len with the password from options: %v", err)
	}
	s = openStream(t, "redis://:"+password+"@"+srv.Addr()+"/0?stream=dlq", Options{})
	if got, want := s.String(), "redis://:xxxxx@"+srv.Addr()+"/0?stream=dlq"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	assertNoSecret(t, password, s.String())
}

func TestACLUser(t *testing.T) {
	const password = "alice-Secret-9"
	srv := redistest.Start(t, "--user", "alice", "on", ">"+password, "~*", "&*", "+@all", "--user", "default", "off")
	ctx := context.Background()
	url := "redis://alice:" + password + "@" + srv.Addr() + "/0?stream=dlq&group=g1"
	s := openStream(t, url, Options{})
	if got, want := s.String(), "redis://alice:xxxxx@"+srv.Addr()+"/0?stream=dlq&group=g1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if s.Key() != "dlq" || s.Group() != "g1" {
		t.Errorf("key %q group %q", s.Key(), s.Group())
	}
	if _, err := s.Import(ctx, fullEnvelope("a-1", []byte("x"))); err != nil {
		t.Errorf("Import as alice: %v", err)
	}
	if n, err := s.Len(ctx); err != nil || n != 1 {
		t.Errorf("Len as alice = %d, %v", n, err)
	}
	// Only the user name from the URL, the password from the environment.
	openStream(t, "redis://alice@"+srv.Addr()+"/0?stream=dlq", Options{Password: password})

	_, err := Open(ctx, "redis://alice:nope-"+password+"@"+srv.Addr()+"/0?stream=dlq", Options{})
	if err == nil || !strings.Contains(err.Error(), "authentication failed") || !strings.Contains(err.Error(), "redis://alice:xxxxx@") {
		t.Errorf("wrong ACL password: %v", err)
	}
	if err != nil {
		assertNoSecret(t, password, err.Error())
	}
}

func TestDatabaseSelection(t *testing.T) {
	ctx := context.Background()
	k := key(t, "dlq")
	shared.Client().Del(ctx, k)
	s := openStream(t, shared.URL(5, k), Options{})
	if _, err := s.Import(ctx, fullEnvelope("x-1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	if n := shared.Client().Exists(ctx, k).Val(); n != 0 {
		t.Errorf("an import into db 5 landed in db 0")
	}
	_, err := Open(ctx, shared.URL(99, k), Options{})
	var ce *backend.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "database 99") {
		t.Errorf("db 99: %v, want a ConfigError naming the database", err)
	}
}

func TestBadURLs(t *testing.T) {
	const secret = "pw-Secret-77"
	cases := []struct{ url, want string }{
		{"redis://u:pa/ss" + secret + "@h:6379/0?stream=x", "not a valid URL"},
		{"redis://u:" + secret + "#x@h:6379/0?stream=x", "not a valid URL"},
		{"redis://u:" + secret + "@h:99999/0?stream=x", "bad port"},
		{"redis://u:" + secret + "@h:0/0?stream=x", "bad port"},
		{"redis://h:abc/0?stream=x", "invalid port"},
		{"http://u:" + secret + "@h/0?stream=x", "unknown scheme"},
		{"redis:h/0?stream=x", "want redis://host:port/db"},
		{"redis://u:" + secret + "@h/zero?stream=x", `bad database "zero"`},
		{"redis://h/-1?stream=x", "bad database"},
		{"redis://h/0/1?stream=x", "bad database"},
		{"redis://u:" + secret + "@h/0", "no stream"},
		{"redis://h/0?stream=", "no stream"},
		{"redis://h/0?stream=x&group=", "group is empty"},
		{"redis://u:" + secret + "@h/0?stream=x&password=" + secret, `unknown query parameter "password"`},
		{"redis://h/0?stream=x&stream=y", "given 2 times"},
		{"redis://h/0?stream=x&tls_ca=/etc/ca.pem", "tls_ca needs rediss://"},
		{"rediss://h/0?stream=x&tls_insecure=maybe", "tls_insecure"},
		{"rediss://h/0?stream=x&tls_ca=/no/such/ca.pem", "tls_ca"},
		{"redis://h/0?stream=x%zz", "bad query string"},
	}
	for _, c := range cases {
		_, err := Open(context.Background(), c.url, Options{})
		var ce *backend.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: err = %v, want a *backend.ConfigError", c.url, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %q, want it to say %q", c.url, err, c.want)
		}
		assertNoSecret(t, secret, err.Error())
	}

	_, err := Open(context.Background(), shared.URL(0, "x"), Options{PageSize: -1})
	var ce *backend.ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("negative page size: %v", err)
	}
}

func TestDefaultsInString(t *testing.T) {
	u, err := parseURL("redis://h?stream=dlq%3Aorders")
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Display(); got != "redis://h:6379/0?stream=dlq%3Aorders" {
		t.Errorf("display = %q", got)
	}
	if u.stream != "dlq:orders" {
		t.Errorf("stream = %q", u.stream)
	}
}

// TestTLS runs redis-server with a TLS port and a certificate for
// redis.test only, signed by a CA of the test's own.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestPKI(t, dir, "redis.test")
	_, tlsPort, _ := net.SplitHostPort(freeAddr(t))
	srv := redistest.Start(t, "--tls-port", tlsPort, "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	host := "127.0.0.1:" + tlsPort
	ctx := context.Background()

	s := openStream(t, "rediss://"+host+"/0?stream=dlq&tls_ca="+caFile+"&tls_server_name=redis.test", Options{})
	if _, err := s.Len(ctx); err != nil {
		t.Errorf("Len over TLS: %v", err)
	}
	openStream(t, "rediss://"+host+"/0?stream=dlq&tls_insecure=true", Options{})

	// The certificate does not name 127.0.0.1, and the system does not
	// trust the test CA.
	for _, u := range []string{
		"rediss://" + host + "/0?stream=dlq&tls_ca=" + caFile,
		"rediss://" + host + "/0?stream=dlq&tls_server_name=redis.test",
	} {
		if _, err := Open(ctx, u, Options{}); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: %v, want a certificate error", u, err)
		}
	}
	// Plain redis:// to the TLS port fails; the plain port still works.
	if _, err := Open(ctx, "redis://"+host+"/0?stream=dlq", Options{}); err == nil {
		t.Errorf("plain connection to the TLS port succeeded")
	}
	openStream(t, srv.URL(0, "dlq"), Options{})
}

func writeTestPKI(t *testing.T, dir, name string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dlqctl test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, typ string, der []byte) string {
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", leafDER), write("key.pem", "EC PRIVATE KEY", keyDER)
}

// TestErrorsNameTheTypedURL: errors name the URL as it was given, not the
// form with the default port and database filled in.
func TestErrorsNameTheTypedURL(t *testing.T) {
	addr := freeAddr(t)
	_, err := Open(context.Background(), "redis://"+addr+"?stream=dlq", Options{})
	if err == nil || !strings.Contains(err.Error(), "redis://"+addr+"?stream=dlq: cannot reach Redis") {
		t.Errorf("connection refused: %v", err)
	}
	_, err = Open(context.Background(), "redis://localhost", Options{})
	if err == nil || !strings.Contains(err.Error(), "redis source redis://localhost: no stream") {
		t.Errorf("no stream: %v", err)
	}
}
