package natstest

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server, so that a test can lose a
// client's connection while the server lives: Hold drops what the server
// sends (its acks among it) from then on, and Cut closes every connection.
// It is fault injection the real server cannot do for a test, around the
// real server.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	held  bool
	armed []byte
	conns []net.Conn
	wg    sync.WaitGroup
}

// Proxy starts a proxy to the server on a free loopback port; it is closed
// in t.Cleanup.
func (s *Server) Proxy(t testing.TB) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: s.Addr()}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is nats://127.0.0.1:PORT of the proxy.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Hold drops every byte the server sends from now on, until Cut: a publish
// reaches the server and is stored, and its ack never reaches the client.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = true
}

// HoldAfterPublish holds (see Hold) as soon as the client has sent a
// publish to subject: that publish reaches the server, which stores it,
// and its ack is the first thing dropped.
func (p *Proxy) HoldAfterPublish(subject string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = []byte("PUB " + subject + " ")
}

// Holding says whether the proxy drops what the server sends.
func (p *Proxy) Holding() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// Cut closes every connection the proxy carries; new ones are forwarded
// again, with nothing held.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns, p.held, p.armed = nil, false, nil
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(server, client, false)
		go p.pipe(client, server, true)
	}
}

// armedBy holds when what the client just sent holds the armed publish.
func (p *Proxy) armedBy(sent []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed != nil && bytes.Contains(sent, p.armed) {
		p.held, p.armed = true, nil
	}
}

// pipe copies from src to dst until either closes; fromServer bytes are
// dropped while the proxy holds.
func (p *Proxy) pipe(dst, src net.Conn, fromServer bool) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := fromServer && p.held
			p.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if !fromServer {
				p.armedBy(buf[:n])
			}
		}
		if err != nil {
			return
		}
	}
}
