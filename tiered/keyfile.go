package tiered

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// ReadKeyFile reads gossip keys (Config.Keys) from path: one key a line,
// base64 or hex, of 16, 24 or 32 bytes; blank lines and lines starting
// with # are skipped. The first key encrypts; list the new key first and
// the old one second during a rotation, then drop the old one. `openssl
// rand -base64 32 > gossip.key` makes one. The error names the file and
// the line.
func ReadKeyFile(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: gossip key file: %w", ErrConfig, err)
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		k, err := hex.DecodeString(t)
		if err != nil {
			if k, err = base64.StdEncoding.DecodeString(t); err != nil {
				return nil, fmt.Errorf("%w: gossip key file %s line %d: neither hex nor base64", ErrConfig, path, line)
			}
		}
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("%w: gossip key file %s line %d: a key of %d bytes, want 16, 24 or 32", ErrConfig, path, line, n)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: gossip key file %s holds no key", ErrConfig, path)
	}
	return keys, nil
}
