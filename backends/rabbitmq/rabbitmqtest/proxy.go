package rabbitmqtest

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a broker and can cut one while the
// broker's confirms are on their way: armed with CutOnPublish, the first
// connection that sends a basic.publish has its broker-to-client half
// frozen at once (the broker still receives every publish, the client
// receives no confirm), and both halves closed a moment later. The
// client sees its connection drop with confirms pending, as when the
// network or the broker's node goes away under a redrive. Connections
// opened later are forwarded normally.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	armed   bool
	armKey  string        // "" any routing key
	cut     chan struct{} // closed once a connection was cut
	conns   []net.Conn
	watches []watch
	counts  map[[2]uint16]int // method frames clients sent, by class and method
}

// watch is a method a client may send, and what to close when one does.
type watch struct {
	class, method uint16
	seen          chan struct{}
}

// Watch returns a channel closed once a client sends a method frame of
// class and method (basic.ack: 60, 80) through the proxy.
func (p *Proxy) Watch(class, method uint16) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := watch{class: class, method: method, seen: make(chan struct{})}
	p.watches = append(p.watches, w)
	return w.seen
}

// Count is how many method frames of class and method (basic.ack: 60,
// 80) clients have sent through the proxy.
func (p *Proxy) Count(class, method uint16) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[[2]uint16{class, method}]
}

// sawMethod counts a method frame and closes its watches.
func (p *Proxy) sawMethod(class, method uint16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.counts == nil {
		p.counts = map[[2]uint16]int{}
	}
	p.counts[[2]uint16{class, method}]++
	kept := p.watches[:0]
	for _, w := range p.watches {
		if w.class == class && w.method == method {
			close(w.seen)
			continue
		}
		kept = append(kept, w)
	}
	p.watches = kept
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port); it is closed in t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, cut: make(chan struct{})}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Via rewrites an AMQP URL of the broker to go through the proxy.
func (p *Proxy) Via(amqpURL string) string {
	u, err := url.Parse(amqpURL)
	if err != nil {
		return amqpURL
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// CutOnPublish arms the proxy (see Proxy).
func (p *Proxy) CutOnPublish() { p.CutOnPublishTo("") }

// CutOnPublishTo arms the proxy for a publish with this routing key (a
// queue's name, through the default exchange).
func (p *Proxy) CutOnPublishTo(routingKey string) {
	p.mu.Lock()
	p.armed, p.armKey = true, routingKey
	p.mu.Unlock()
}

// Cut is closed once the armed proxy has cut a connection.
func (p *Proxy) Cut() <-chan struct{} { return p.cut }

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		go p.pipe(c, b)
	}
}

// pipe forwards one connection: client c, broker b.
func (p *Proxy) pipe(c, b net.Conn) {
	var frozen sync.Mutex // held while broker-to-client is frozen
	published := make(chan struct{})
	go func() {
		// Broker to client, until frozen.
		buf := make([]byte, 32<<10)
		for {
			n, err := b.Read(buf)
			if n > 0 {
				frozen.Lock()
				select {
				case <-published:
					frozen.Unlock()
					return
				default:
				}
				_, werr := c.Write(buf[:n])
				frozen.Unlock()
				if werr != nil {
					return
				}
			}
			if err != nil {
				c.Close()
				return
			}
		}
	}()
	// Client to broker, watching for the first basic.publish.
	err := forwardFrames(c, b, p.sawMethod, func(key string) bool {
		p.mu.Lock()
		armed := p.armed && (p.armKey == "" || p.armKey == key)
		if armed {
			p.armed = false
		}
		p.mu.Unlock()
		if armed {
			frozen.Lock()
			close(published)
			frozen.Unlock()
			go func() {
				// Long enough for the rest of the chunk's publishes to
				// reach the broker, short enough to leave confirms
				// pending.
				time.Sleep(300 * time.Millisecond)
				close(p.cut)
				c.Close()
				b.Close()
			}()
		}
		return armed
	})
	if err != nil && !errors.Is(err, net.ErrClosed) {
		c.Close()
		b.Close()
	}
}

// forwardFrames copies AMQP 0-9-1 traffic from src to dst frame by frame,
// tells saw of each method frame, and calls onPublish with the routing key
// of each basic.publish method frame (class 60, method 40) until it
// returns true.
func forwardFrames(src, dst net.Conn, saw func(class, method uint16), onPublish func(routingKey string) bool) error {
	header := make([]byte, 8) // "AMQP" 0 0 9 1
	if _, err := io.ReadFull(src, header); err != nil {
		return err
	}
	if _, err := dst.Write(header); err != nil {
		return err
	}
	watching := true
	fh := make([]byte, 7)
	for {
		if _, err := io.ReadFull(src, fh); err != nil {
			return err
		}
		size := binary.BigEndian.Uint32(fh[3:])
		body := make([]byte, int(size)+1) // payload and frame-end
		if _, err := io.ReadFull(src, body); err != nil {
			return err
		}
		if fh[0] == 1 && size >= 4 {
			class, method := binary.BigEndian.Uint16(body[0:]), binary.BigEndian.Uint16(body[2:])
			saw(class, method)
			if watching && class == 60 && method == 40 && onPublish(routingKey(body[4:size])) {
				watching = false
			}
		}
		if _, err := dst.Write(append(fh, body...)); err != nil {
			return err
		}
	}
}

// routingKey reads basic.publish's routing key from its arguments:
// reserved short, exchange shortstr, routing-key shortstr.
func routingKey(args []byte) string {
	if len(args) < 3 {
		return ""
	}
	ex := int(args[2])
	rest := args[3:]
	if len(rest) < ex+1 {
		return ""
	}
	rest = rest[ex:]
	n := int(rest[0])
	if len(rest) < n+1 {
		return ""
	}
	return string(rest[1 : n+1])
}
