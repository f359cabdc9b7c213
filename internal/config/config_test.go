package config

import (
	"errors"
	"fmt"
	"testing"
)

func TestError_AsAndIs(t *testing.T) {
	sentinel := errors.New("pkg: invalid config")
	err := fmt.Errorf("open: %w", New(sentinel, "Window", 0, "1..1024"))
	var ce *Error
	if !errors.As(err, &ce) || ce.Field != "Window" || ce.Value != "0" || ce.Allowed != "1..1024" {
		t.Fatalf("errors.As: %#v", ce)
	}
	if !errors.Is(err, sentinel) {
		t.Fatal("the sentinel is not seen through the error")
	}
	if got, want := err.Error(), "open: pkg: invalid config: Window = 0, want 1..1024"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	if got := New(nil, "Account", "x y", "1..8 printable ASCII bytes").Error(); got != `Account = "x y", want 1..8 printable ASCII bytes` {
		t.Fatalf("message %q", got)
	}
}
