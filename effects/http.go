package effects

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

const (
	// httpMaxBody bounds an answer: a batch's records are small, a runaway
	// server's answer need not be read to the end.
	httpMaxBody = 64 << 20
	// httpErrBodyMax is how much of a non-2xx answer an error quotes.
	httpErrBodyMax = 500
)

// httpProbe POSTs a batch's event IDs to the consumer's endpoint.
type httpProbe struct {
	url     string
	display string
	token   string
	client  *http.Client
	own     bool // client made here, closed by Close
	timeout time.Duration
	secrets []string // URL password and token, to scrub error messages
}

func openHTTP(raw string, opts Options) (*httpProbe, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, backend.Configf("effects %s: not a valid URL: %v", backend.RedactUserinfo(raw), URLError(err))
	}
	display := maskQuery(u, func(string) bool { return true })
	if u.Host == "" {
		return nil, backend.Configf("effects %s: no host (want %s://host[:port]/path)", display, u.Scheme)
	}
	p := &httpProbe{url: raw, display: display, token: opts.Token, client: opts.HTTPClient, timeout: opts.Timeout, secrets: []string{opts.Token}}
	if p.client == nil {
		// Its own transport, so that Close drops only its connections.
		p.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		p.own = true
	}
	p.secrets = append(p.secrets, backend.URLSecrets(raw)...)
	return p, nil
}

// Records is one POST {"event_ids":[…]} per batch.
func (p *httpProbe) Records(ctx context.Context, eventIDs []string) (map[string]Record, error) {
	ids := Batch(eventIDs)
	res := NewResults(ids)
	if len(ids) == 0 {
		return res.got, nil
	}
	got, err := p.post(ctx, ids, res)
	return got, scrub(err, p.secrets...)
}

func (p *httpProbe) post(ctx context.Context, ids []string, res *Results) (map[string]Record, error) {
	body, err := json.Marshal(struct {
		EventIDs []string `json:"event_ids"`
	}{ids})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p, URLError(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", p, ctx.Err())
		}
		// url.Error quotes the URL; say it once, redacted.
		return nil, fmt.Errorf("%s: %w", p, URLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, httpErrBodyMax+1))
		return nil, fmt.Errorf("%s: %s: %s", p, resp.Status, Truncate(string(b), httpErrBodyMax))
	}
	var answer struct {
		Results *[]Record `json:"results"`
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, httpMaxBody))
	if err := dec.Decode(&answer); err != nil {
		return nil, fmt.Errorf("%s: answer is not {\"results\":[…]}: %v", p, err)
	}
	if answer.Results == nil {
		return nil, fmt.Errorf("%s: answer has no \"results\" array", p)
	}
	for i, rec := range *answer.Results {
		if rec.EventID == "" {
			return nil, fmt.Errorf("%s: results[%d] has no event_id", p, i)
		}
		if err := res.Add(rec); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return res.got, nil
}

func (p *httpProbe) String() string { return p.display }

// Close releases idle connections of a client the probe made itself.
func (p *httpProbe) Close() error {
	if p.own {
		p.client.CloseIdleConnections()
	}
	return nil
}
