package sqsdlq

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

func TestParseURL(t *testing.T) {
	u, err := parseURL("sqs://orders_DLQ.fifo?region=eu-west-1&endpoint=http://127.0.0.1:9324/&receivers=8&account=123456789012&lease_settle=5s")
	if err != nil {
		t.Fatal(err)
	}
	if u.queue != "orders_DLQ.fifo" || u.region != "eu-west-1" || u.endpoint != "http://127.0.0.1:9324" || u.receivers != 8 || u.account != "123456789012" || u.leaseSettle != 5*time.Second {
		t.Fatalf("%+v", u)
	}
	u, err = parseURL("https://sqs.us-east-2.amazonaws.com/123456789012/orders-dlq")
	if err != nil {
		t.Fatal(err)
	}
	if u.queue != "orders-dlq" || u.region != "us-east-2" || u.account != "123456789012" || u.queueURL != "https://sqs.us-east-2.amazonaws.com/123456789012/orders-dlq" {
		t.Fatalf("%+v", u)
	}
	if u, err := parseURL("https://eu-west-1.queue.amazonaws.com/123456789012/q"); err != nil || u.region != "eu-west-1" {
		t.Fatalf("legacy host: %+v %v", u, err)
	}
	for v, want := range map[string]int{"1048576": 1 << 20, "1MiB": 1 << 20, "256KiB": 256 << 10, "1024": 1024} {
		if u, err := parseURL("sqs://q?max_message_size=" + v); err != nil || u.maxMessageSize != want {
			t.Errorf("max_message_size=%s: %d, %v; want %d", v, u.maxMessageSize, err, want)
		}
	}
	for raw, want := range map[string]string{
		"https://example.com/123456789012/q":                          "no SQS host",
		"https://sqs.us-east-1.amazonaws.com/q":                       "ACCOUNT/QUEUE",
		"https://sqs.us-east-1.amazonaws.com/123456789012/q?region=x": "does not go with a queue URL",
		"sqs://user:hunter2@q":                                        "user info",
		"sqs://q?colour=red":                                          "unknown query parameter",
		"sqs://q?receivers=0":                                         "receivers",
		"sqs://q?endpoint=ftp://x":                                    "endpoint",
		"sqs://bad!name":                                              "is not an SQS queue name",
		"sqs://q/extra":                                               "unexpected path",
		"sqs://q?account=12":                                          "account",
		"sqs://q?region=a&region=b":                                   `query parameter "region" given 2 times`,
		"sqs://q?receivers=x":                                         `receivers=xxxxx: want a whole number from 1 to 32`,
		"sqs://q?lease_settle=2m":                                     `lease_settle=xxxxx: want a duration from 0s to 1m`,
		"sqs://q?max_message_size=2MiB":                               `max_message_size=xxxxx: want a size from 1024 to 1048576 bytes`,
		"sqs://q?max_message_size=1000":                               `max_message_size=xxxxx: want a size`,
		"sqs://q?max_message_size=1GB":                                `max_message_size=xxxxx: want a size`,
		"ftp://q":                                                     `unknown scheme "ftp"`,
		"sqs://q#:hunter2@h":                                          "a fragment (#) is not allowed",
		"sqs://q/:hunter2@h":                                          "unexpected path (not shown",
	} {
		_, err := parseURL(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseURL(%q) = %v, want an error containing %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func TestExpiry(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at, warn := expiry(now.Add(-4*24*time.Hour+2*time.Hour), 4*24*time.Hour, now)
	if at != "2026-12-01T14:00:00Z" || len(warn) != 1 || !strings.Contains(warn[0], "expires in 2h0m0s") {
		t.Fatalf("at %q warn %q", at, warn)
	}
	if at, warn := expiry(now.Add(-time.Hour), 4*24*time.Hour, now); at == "" || warn != nil {
		t.Fatalf("far off: at %q warn %q", at, warn)
	}
	if at, warn := expiry(now, 0, now); at != "" || warn != nil {
		t.Fatalf("no retention: at %q warn %q", at, warn)
	}
}

// TestNoCredentials: without credentials, opening the queue fails at once
// with one line that says how to give them, even where the instance
// metadata service (the chain's last resort) never answers.
func TestNoCredentials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts and never answers, as a blackholed IMDS does
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_EC2_METADATA_DISABLED"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://"+ln.Addr().String())
	start := time.Now()
	_, err = Open(context.Background(), "sqs://orders-dlq?region=eu-west-1&endpoint=http://127.0.0.1:1", Options{})
	var ce *backend.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %v, want one line (exit 2) saying how to set credentials", err)
	}
	if d := time.Since(start); d > 2*credentialsWait {
		t.Errorf("took %v", d)
	}
}

// TestClaims: SQS takes sqs:// URLs and https URLs of AWS SQS hosts, and
// leaves other https URLs to a backend that may share the scheme.
func TestClaims(t *testing.T) {
	for raw, want := range map[string]bool{
		"sqs://orders?region=eu-west-1":                               true,
		"https://sqs.eu-west-1.amazonaws.com/123456789012/orders":     true,
		"https://eu-west-1.queue.amazonaws.com/123456789012/orders":   true,
		"https://sqs.cn-north-1.amazonaws.com.cn/123456789012/orders": true,
		"https://example.com/123456789012/orders":                     false,
		"https://sqs.eu-west-1.amazonaws.com.evil.test/1/orders":      false,
		"redis://localhost:6379/0?stream=s":                           false,
	} {
		if got := claims(raw); got != want {
			t.Errorf("claims(%s) = %v, want %v", raw, got, want)
		}
	}
}
