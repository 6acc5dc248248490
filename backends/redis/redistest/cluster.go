package redistest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

// clusterTimeout bounds `redis-cli --cluster create` and the wait for
// cluster_state:ok on every node.
const clusterTimeout = 30 * time.Second

// Cluster is a real Redis Cluster of three masters and no replicas, each a
// Server on its own free loopback port (and its own free cluster bus port,
// so that port+10000 never has to be free or below 65536).
type Cluster struct {
	nodes []*Server

	mu     sync.Mutex
	client *redis.ClusterClient

	stopOnce sync.Once
	stopErr  error
}

// StartCluster runs a 3-master Redis Cluster for the test and stops it in
// t.Cleanup. It fails the test when redis-server or redis-cli cannot be
// found or the cluster does not come up.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := StartClusterProcess()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("redistest: %v", err)
		}
	})
	return c
}

// StartClusterProcess runs a 3-master Redis Cluster without a testing.TB;
// the caller must call Stop.
func StartClusterProcess() (*Cluster, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, errors.New("redis-cli not found: install it (apt-get install redis-tools)")
	}
	c := &Cluster{}
	for range 3 {
		bus, err := testproc.FreePort()
		if err != nil {
			_ = c.Stop()
			return nil, err
		}
		s, err := StartProcess(
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", "5000",
		)
		if err != nil {
			_ = c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitOK(ctx); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// waitOK polls CLUSTER INFO on every node until each says cluster_state:ok
// and knows all three nodes.
func (c *Cluster) waitOK(ctx context.Context) error {
	for _, s := range c.nodes {
		for {
			info, err := s.Client().ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("cluster node %s not ok after %s (%v): %s\n%s", s.Addr(), clusterTimeout, err, info, s.log.Tail(2000))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// Addrs are the nodes' host:port addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.nodes {
		out = append(out, s.Addr())
	}
	return out
}

// Nodes are the cluster's servers.
func (c *Cluster) Nodes() []*Server { return c.nodes }

// URL is a dlqctl source URL for the stream key, seeded with the first
// node, with cluster=true.
func (c *Cluster) URL(stream string) string {
	return fmt.Sprintf("redis://%s/0?stream=%s&cluster=true", c.nodes[0].Addr(), url.QueryEscape(stream))
}

// Client is a go-redis cluster client for seeding and inspecting data. It
// is closed by Stop.
func (c *Cluster) Client() *redis.ClusterClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		c.client = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                    c.Addrs(),
			DisableIdentity:          true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
	}
	return c.client
}

// Stop stops every node (by PID, as Server.Stop does). It is safe to call
// more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		if c.client != nil {
			_ = c.client.Close()
			c.client = nil
		}
		c.mu.Unlock()
		var errs []error
		for _, s := range c.nodes {
			errs = append(errs, s.Stop())
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}
