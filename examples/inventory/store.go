package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/seqd/seqd/wire"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)

// Store is the database the Flusher writes and a restart loads. Write
// commits a batch's stock, its orders and its seq in one database
// transaction, so the seq a restart rewinds from is always the state's.
type Store interface {
	Load(ctx context.Context) (*Snapshot, error)
	Write(ctx context.Context, b *Batch) error
	Orders(ctx context.Context) ([]Order, error)
	Close() error
}

// SQLStore is a Store on database/sql: SQLite (modernc.org/sqlite, pure
// Go) or PostgreSQL (jackc/pgx). Tables: inventory_stock (key, qty),
// inventory_orders (seq, account, ref, key, delta) and inventory_meta
// (one row: flushed_seq, digest, txns, refused, flushes).
type SQLStore struct {
	db       *sql.DB
	postgres bool
}

// OpenStore opens a database by URL: "sqlite:PATH" (or a path ending in
// .db), or "postgres://..." / "postgresql://...".
func OpenStore(ctx context.Context, url string) (*SQLStore, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return OpenPostgres(ctx, url)
	case strings.HasPrefix(url, "sqlite:"):
		return OpenSQLite(ctx, strings.TrimPrefix(url, "sqlite:"))
	case strings.HasSuffix(url, ".db"):
		return OpenSQLite(ctx, url)
	}
	return nil, fmt.Errorf("%w: database %q: want sqlite:PATH or postgres://HOST/DB", ErrConfig, url)
}

// OpenSQLite opens (creating) the SQLite database at path, in WAL mode
// with synchronous=NORMAL: a commit survives a process crash; an OS
// crash may lose the last commits, which the restart then rewinds.
func OpenSQLite(ctx context.Context, path string) (*SQLStore, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: open sqlite %s: %w", ErrStore, path, err)
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises anyway
	return newSQLStore(ctx, db, false)
}

// OpenPostgres opens a PostgreSQL database through pgx.
func OpenPostgres(ctx context.Context, dsn string) (*SQLStore, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: open postgres: %w", ErrStore, err)
	}
	db.SetMaxOpenConns(2)
	return newSQLStore(ctx, db, true)
}

func newSQLStore(ctx context.Context, db *sql.DB, postgres bool) (*SQLStore, error) {
	s := &SQLStore{db: db, postgres: postgres}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS inventory_stock (key TEXT PRIMARY KEY, qty BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS inventory_orders (seq BIGINT PRIMARY KEY, account TEXT NOT NULL, ref BIGINT NOT NULL, key TEXT NOT NULL, delta BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS inventory_meta (id INTEGER PRIMARY KEY, flushed_seq BIGINT NOT NULL, digest BIGINT NOT NULL, txns BIGINT NOT NULL, refused BIGINT NOT NULL, flushes BIGINT NOT NULL)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("%w: create tables: %w", ErrStore, err)
		}
	}
	return s, nil
}

// DB is the database handle (for checks and reports).
func (s *SQLStore) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *SQLStore) Close() error { return s.db.Close() }

// ph is the n-th (1-based) placeholder of the dialect.
func (s *SQLStore) ph(n int) string {
	if s.postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// Load reads the whole inventory and the seq it was flushed at (0 for a
// new database).
func (s *SQLStore) Load(ctx context.Context) (*Snapshot, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: !s.postgres})
	if err != nil {
		return nil, fmt.Errorf("%w: load: %w", ErrStore, err)
	}
	defer tx.Rollback()
	snap := &Snapshot{}
	var digest int64
	err = tx.QueryRowContext(ctx, `SELECT flushed_seq, digest, txns, refused FROM inventory_meta WHERE id = 1`).Scan(&snap.Seq, &digest, &snap.Txns, &snap.Refused)
	switch {
	case err == sql.ErrNoRows:
	case err != nil:
		return nil, fmt.Errorf("%w: load meta: %w", ErrStore, err)
	default:
		snap.Digest = uint64(digest)
	}
	rows, err := tx.QueryContext(ctx, `SELECT key, qty FROM inventory_stock ORDER BY key`)
	if err != nil {
		return nil, fmt.Errorf("%w: load stock: %w", ErrStore, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var q int64
		if err := rows.Scan(&k, &q); err != nil {
			return nil, fmt.Errorf("%w: load stock: %w", ErrStore, err)
		}
		snap.Keys, snap.Stock = append(snap.Keys, k), append(snap.Stock, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: load stock: %w", ErrStore, err)
	}
	return snap, nil
}

// rowsPerStatement bounds a multi-row INSERT (SQLite allows 32766
// parameters, PostgreSQL 65535).
const rowsPerStatement = 1000

// Write commits b in one transaction: upserts of the changed keys, the
// orders, and the meta row with b.Seq and b.Digest.
func (s *SQLStore) Write(ctx context.Context, b *Batch) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%w: flush seq %d: %w", ErrStore, b.Seq, err)
	}
	defer tx.Rollback()
	for lo := 0; lo < len(b.Keys); lo += rowsPerStatement {
		hi := min(lo+rowsPerStatement, len(b.Keys))
		var q strings.Builder
		q.WriteString(`INSERT INTO inventory_stock (key, qty) VALUES `)
		args := make([]any, 0, 2*(hi-lo))
		for i := lo; i < hi; i++ {
			if i > lo {
				q.WriteByte(',')
			}
			fmt.Fprintf(&q, "(%s,%s)", s.ph(len(args)+1), s.ph(len(args)+2))
			args = append(args, b.Keys[i], b.Stock[i])
		}
		q.WriteString(` ON CONFLICT (key) DO UPDATE SET qty = excluded.qty`)
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("%w: flush seq %d: stock: %w", ErrStore, b.Seq, err)
		}
	}
	for lo := 0; lo < len(b.Orders); lo += rowsPerStatement {
		hi := min(lo+rowsPerStatement, len(b.Orders))
		var q strings.Builder
		q.WriteString(`INSERT INTO inventory_orders (seq, account, ref, key, delta) VALUES `)
		args := make([]any, 0, 5*(hi-lo))
		for i := lo; i < hi; i++ {
			if i > lo {
				q.WriteByte(',')
			}
			n := len(args)
			fmt.Fprintf(&q, "(%s,%s,%s,%s,%s)", s.ph(n+1), s.ph(n+2), s.ph(n+3), s.ph(n+4), s.ph(n+5))
			o := &b.Orders[i]
			args = append(args, int64(o.Seq), wire.Account(o.Account).String(), int64(o.Ref), o.Key, o.Delta)
		}
		// A restart re-applies what it rewinds; a seq already recorded
		// is the same order.
		q.WriteString(` ON CONFLICT (seq) DO NOTHING`)
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("%w: flush seq %d: orders: %w", ErrStore, b.Seq, err)
		}
	}
	meta := fmt.Sprintf(`INSERT INTO inventory_meta (id, flushed_seq, digest, txns, refused, flushes) VALUES (1, %s, %s, %s, %s, 1)
		ON CONFLICT (id) DO UPDATE SET flushed_seq = excluded.flushed_seq, digest = excluded.digest,
		txns = excluded.txns, refused = excluded.refused, flushes = inventory_meta.flushes + 1`, s.ph(1), s.ph(2), s.ph(3), s.ph(4))
	if _, err := tx.ExecContext(ctx, meta, int64(b.Seq), int64(b.Digest), int64(b.Txns), int64(b.Refused)); err != nil {
		return fmt.Errorf("%w: flush seq %d: meta: %w", ErrStore, b.Seq, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: flush seq %d: commit: %w", ErrStore, b.Seq, err)
	}
	return nil
}

// Orders returns every order recorded, by seq.
func (s *SQLStore) Orders(ctx context.Context) ([]Order, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, account, ref, key, delta FROM inventory_orders ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("%w: orders: %w", ErrStore, err)
	}
	defer rows.Close()
	var out []Order
	for rows.Next() {
		var o Order
		var seq, ref int64
		var acct string
		if err := rows.Scan(&seq, &acct, &ref, &o.Key, &o.Delta); err != nil {
			return nil, fmt.Errorf("%w: orders: %w", ErrStore, err)
		}
		o.Seq, o.Ref = uint64(seq), uint64(ref)
		if a, err := wire.ParseAccount(acct); err == nil {
			o.Account = uint64(a)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}
