package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/seqd/seqd/internal/tlsconf"
)

// benchTLSArgs makes a throwaway CA in dir and one certificate that every
// process of the run presents (the bench measures the cost of TLS, not
// who is who), and returns the flags that turn TLS on.
func benchTLSArgs(dir string) ([]string, error) {
	a, err := tlsconf.NewAuthority("bench", time.Hour)
	if err != nil {
		return nil, err
	}
	ca := filepath.Join(dir, "ca.crt")
	if err := a.WriteCA(ca); err != nil {
		return nil, err
	}
	c, err := a.Issue(dir, "bench", ca, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	if err != nil {
		return nil, err
	}
	return []string{"--security.tls-cert", c.CertFile, "--security.tls-key", c.KeyFile, "--security.tls-ca", c.CAFile}, nil
}

// benchCompareTLS runs the bench without TLS, then with, and prints both
// lines and the ratios of TLS's figures to plain TCP's.
func benchCompareTLS(ctx context.Context, o Config, outDir string) error {
	plain, with := o, o
	plain.TLS, with.TLS = "off", "on"
	l0, err := benchRun(ctx, plain, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "%s tls=off\n", l0)
	l1, err := benchRun(ctx, with, outDir)
	if err != nil {
		return err
	}
	fmt.Fprintln(o.Out, l1)
	keys := []string{"rate", "cpu_s_per_million"}
	if o.Mode == "rtt" {
		keys = []string{"p50_us", "p99_us", "cpu_s_per_million"}
	}
	var ratios []string
	for _, k := range keys {
		a, err := field(l0, k)
		if err != nil {
			return err
		}
		b, err := field(l1, k)
		if err != nil {
			return err
		}
		if a > 0 {
			ratios = append(ratios, fmt.Sprintf("%s_ratio=%.2f", strings.TrimSuffix(strings.TrimSuffix(k, "_us"), "_s_per_million"), b/a))
		}
	}
	fmt.Fprintf(o.Out, "bench transport=tcp mode=%s tls=on vs_plain %s\n", o.Mode, strings.Join(ratios, " "))
	return nil
}
