package kafkatest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	kafkadlq "github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/internal/testproc"
)

// shareWorkerSource is the Java program that consumes in a share group with
// Apache Kafka's own KafkaShareConsumer: the dead letters the tests read
// are made by the broker for a client no one here wrote.
//
//go:embed sharetool/ShareWorker.java
var shareWorkerSource []byte

// ShareWorker runs sharetool/ShareWorker.java, compiled once into a cache
// folder next to the broker's jars.
type ShareWorker struct {
	java, classpath string
}

// NewShareWorker fetches the broker's jars when they are not cached yet
// (kafka-clients is among them) and compiles the program with javac when
// no compiled copy of this source is cached.
func NewShareWorker() (*ShareWorker, error) {
	if err := testproc.CheckJava(JavaNotFoundMessage); err != nil {
		return nil, err
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		return nil, errors.New("javac not found: the share-group tests compile a small KafkaShareConsumer program (apt-get install openjdk-17-jdk-headless)")
	}
	script, err := testproc.FindScript(javaServer().Script)
	if err != nil {
		return nil, err
	}
	out, err := testproc.RunScript(javaServer().FetchTimeout, nil, "", script, "fetch")
	if err != nil {
		return nil, fmt.Errorf("fetch the Kafka jars: %w", err)
	}
	libs := strings.TrimSpace(lastLine(out))
	sum := sha256.Sum256(shareWorkerSource)
	dir := filepath.Join(filepath.Dir(filepath.Dir(libs)), "sharetool-"+hex.EncodeToString(sum[:6]))
	if !compiled(dir) {
		if err := compileShareWorker(javac, libs, dir); err != nil {
			return nil, err
		}
	}
	java := "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java = filepath.Join(home, "bin", "java")
	}
	return &ShareWorker{java: java, classpath: dir + string(os.PathListSeparator) + filepath.Join(libs, "*")}, nil
}

// compileShareWorker compiles into a new folder beside dir and renames it
// to dir, so that test binaries compiling at once never see half a build.
func compileShareWorker(javac, libs, dir string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "sharetool-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "ShareWorker.java")
	if err := os.WriteFile(src, shareWorkerSource, 0o644); err != nil {
		return err
	}
	cmd := exec.Command(javac, "-nowarn", "-cp", clientsJar(libs), "-d", tmp, src)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("javac ShareWorker.java: %v: %s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil && !compiled(dir) {
		return err
	}
	return nil
}

// clientsJar is the kafka-clients jar among the broker's jars.
func clientsJar(libs string) string {
	m, _ := filepath.Glob(filepath.Join(libs, "kafka-clients-*.jar"))
	if len(m) == 0 {
		return filepath.Join(libs, "*")
	}
	return m[0]
}

// compiled says whether dir holds the compiled worker (a failed rename
// lost to another test binary that compiled the same source first).
func compiled(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "ShareWorker.class"))
	return err == nil
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// ShareAck is one acknowledgement the worker made.
type ShareAck struct {
	Action        string // ACCEPT, RELEASE or REJECT
	Topic         string
	Partition     int32
	Offset        int64
	DeliveryCount int
	EventID       string
	Value         string
}

// ShareRun is how one run of the worker consumes.
type ShareRun struct {
	Bootstrap, Group, Topic string
	// Reject and Release hold texts: a record whose value contains one is
	// rejected, or released (until the delivery limit archives it); any
	// other record is accepted.
	Reject, Release []string
	// Idle ends the run once that long passes without a record after the
	// first one; Max ends it in any case.
	Idle, Max time.Duration
}

// Consume runs the worker once and returns its acknowledgements in order.
func (w *ShareWorker) Consume(ctx context.Context, run ShareRun) ([]ShareAck, error) {
	args := []string{"-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", w.classpath, "ShareWorker",
		run.Bootstrap, run.Group, run.Topic,
		strconv.FormatInt(run.Idle.Milliseconds(), 10), strconv.FormatInt(run.Max.Milliseconds(), 10)}
	for _, s := range run.Reject {
		args = append(args, "reject="+s)
	}
	for _, s := range run.Release {
		args = append(args, "release="+s)
	}
	cmd := exec.CommandContext(ctx, w.java, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ShareWorker: %v: %s", err, tail(stderr.String(), 2000))
	}
	var acks []ShareAck
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 7)
		if len(f) != 7 {
			continue // a log line
		}
		p, err1 := strconv.ParseInt(f[2], 10, 32)
		o, err2 := strconv.ParseInt(f[3], 10, 64)
		dc, err3 := strconv.Atoi(f[4])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("ShareWorker line %q: %w", sc.Text(), err)
		}
		acks = append(acks, ShareAck{Action: f[0], Topic: f[1], Partition: int32(p), Offset: o, DeliveryCount: dc, EventID: f[5], Value: f[6]})
	}
	return acks, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// ShareDLQ is a share group's dead-letter configuration.
type ShareDLQ struct {
	// Topic is errors.deadletterqueue.topic.name (the broker wants the
	// prefix "dlq."); "" leaves the group's DLQ topic as it is.
	Topic string
	// Copy turns on errors.deadletterqueue.copy.record.enable: the dead
	// letter carries the record's key, value and headers, not only the
	// broker's headers.
	Copy bool
	// DeliveryLimit is share.delivery.count.limit (2 to 10; 0: the
	// broker's default, 5).
	DeliveryLimit int
}

// ConfigureShareGroup sets a share group's dead-letter topic (unless
// dlq.Topic is ""), copy mode and delivery limit, and makes it start at
// the earliest offset so that it reads what a test produced before it
// joined; it creates the dead-letter topic, opted in with
// errors.deadletterqueue.group.enable=true, when that topic does not
// exist yet.
func ConfigureShareGroup(ctx context.Context, bootstrap, group string, dlq ShareDLQ) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	if dlq.Topic != "" {
		on := "true"
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"errors.deadletterqueue.group.enable": &on}, dlq.Topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			return fmt.Errorf("kafkatest: create DLQ topic %s: %w", dlq.Topic, err)
		}
	}
	set := map[string]string{
		"share.auto.offset.reset":                   "earliest",
		"errors.deadletterqueue.copy.record.enable": strconv.FormatBool(dlq.Copy),
	}
	if dlq.Topic != "" {
		set["errors.deadletterqueue.topic.name"] = dlq.Topic
	}
	if dlq.DeliveryLimit > 0 {
		set["share.delivery.count.limit"] = strconv.Itoa(dlq.DeliveryLimit)
	}
	if err := kafkadlq.SetGroupConfigs(ctx, cl, group, set); err != nil {
		return fmt.Errorf("kafkatest: set group %s configs: %w", group, err)
	}
	return nil
}
