package inventory

import (
	"context"
	"testing"

	"github.com/seqd/seqd/examples/inventory/internal/pgtest"
)

// TestSQLStore_Postgres: the store round trip on a real PostgreSQL (the
// Debian package, started by the test; skipped when not installed).
func TestSQLStore_Postgres(t *testing.T) {
	dsn := pgtest.Start(t)
	st, err := OpenStore(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testStoreRoundTrip(t, st)
}
