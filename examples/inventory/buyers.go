package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"
)

// BuyersConfig says how a crowd of buyers storms a front.
type BuyersConfig struct {
	URLs   []string // fronts' base URLs (http://host:port); buyer i uses URLs[i%len]
	Buyers int      // each sends one reservation request
	Keys   []string // buyer i reserves Keys[i%len(Keys)]
	Qty    int64    // per buyer (1)
	// Timeout bounds one request (the front's own timeout should be
	// shorter, so that it answers).
	Timeout time.Duration
}

// BuyerResult is one buyer's answer.
type BuyerResult struct {
	Buyer   int
	Key     string
	Code    int // HTTP status; 0: no answer (the error is in Err)
	Answer  Answer
	Err     string
	Latency time.Duration
}

// BuyersReport sums up a storm.
type BuyersReport struct {
	Results  []BuyerResult // by buyer
	Won      int           // 200
	Refused  int           // 409 (sold out)
	Timeouts int           // 504
	Errors   int           // no answer, or another status
	Elapsed  time.Duration
	P50, P99 time.Duration
}

func (r BuyersReport) String() string {
	return fmt.Sprintf("buyers=%d won=%d refused=%d timeouts=%d errors=%d elapsed=%v p50=%v p99=%v",
		len(r.Results), r.Won, r.Refused, r.Timeouts, r.Errors, r.Elapsed.Round(time.Millisecond), r.P50, r.P99)
}

// RunBuyers starts every buyer at once (a barrier), each sending one
// POST /reserve, and collects exactly one result per buyer.
func RunBuyers(ctx context.Context, cfg BuyersConfig) BuyersReport {
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Buyers, MaxConnsPerHost: 0, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: cfg.Timeout}
	qty := max(cfg.Qty, 1)
	res := make([]BuyerResult, cfg.Buyers)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range cfg.Buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := cfg.Keys[i%len(cfg.Keys)]
			r := BuyerResult{Buyer: i, Key: key}
			url := fmt.Sprintf("%s/reserve?key=%s&qty=%d", cfg.URLs[i%len(cfg.URLs)], key, qty)
			<-gate
			t0 := time.Now()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
			if err == nil {
				var resp *http.Response
				if resp, err = client.Do(req); err == nil {
					r.Code = resp.StatusCode
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if json.Unmarshal(b, &r.Answer) != nil {
						r.Err = "bad answer: " + string(b)
					}
				}
			}
			if err != nil {
				r.Err = err.Error()
			}
			r.Latency = time.Since(t0)
			res[i] = r
		}()
	}
	t0 := time.Now()
	close(gate)
	wg.Wait()
	rep := BuyersReport{Results: res, Elapsed: time.Since(t0)}
	lat := make([]time.Duration, 0, len(res))
	for _, r := range res {
		switch {
		case r.Err != "":
			rep.Errors++
		case r.Code == http.StatusOK:
			rep.Won++
		case r.Code == http.StatusConflict:
			rep.Refused++
		case r.Code == http.StatusGatewayTimeout:
			rep.Timeouts++
		default:
			rep.Errors++
		}
		lat = append(lat, r.Latency)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		rep.P50, rep.P99 = lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond)
	}
	return rep
}
