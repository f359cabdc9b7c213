package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"testing"
)

// The primitive of authenticated frames was chosen with these
// (docs/security.md has the figures): a MAC over one frame of 256 B to
// 8 KiB with a state built once and reset per frame. Run with
// go test -run X -bench 'MACPrimitive' -count 5 ./wire.

var macSizes = []int{256, 1472, 8192}

func benchHMAC(b *testing.B, h hash.Hash) {
	for _, n := range macSizes {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			buf := make([]byte, n)
			out := make([]byte, 0, 64)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				h.Reset()
				h.Write(buf)
				out = h.Sum(out[:0])[:16] // truncated to 16 B
			}
		})
	}
}

func BenchmarkMACPrimitive_HMACSHA256(b *testing.B) {
	benchHMAC(b, hmac.New(sha256.New, make([]byte, 32)))
}

func BenchmarkMACPrimitive_HMACSHA512_256(b *testing.B) {
	benchHMAC(b, hmac.New(sha512.New512_256, make([]byte, 32)))
}

func benchGMAC(b *testing.B, keyBytes int) {
	blk, _ := aes.NewCipher(make([]byte, keyBytes))
	g, _ := cipher.NewGCM(blk)
	nonce := make([]byte, 12)
	for _, n := range macSizes {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			buf := make([]byte, n)
			out := make([]byte, 0, 16)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				nonce[0]++
				out = g.Seal(out[:0], nonce, nil, buf)
			}
		})
	}
}

func BenchmarkMACPrimitive_GMAC128(b *testing.B) { benchGMAC(b, 16) }
func BenchmarkMACPrimitive_GMAC256(b *testing.B) { benchGMAC(b, 32) }

// BenchmarkAuth is Sign and Verify as a shell calls them.
func BenchmarkAuth(b *testing.B) {
	a := testAuth(b, testKeys(b), 0)
	for _, n := range macSizes {
		var w PacketWriter
		buf := make([]byte, n+AuthTrailerBytes)
		if err := w.Reset(buf[:n], KindData, 1, 7, 1, 0, 1); err != nil {
			b.Fatal(err)
		}
		pay := make([]byte, n-PacketHeaderBytes-RecordHeaderBytes)
		if err := w.Append(&Record{Time: 1, Account: MustAccount("a"), CmdSeq: 1, Payload: pay, Total: uint32(len(pay))}); err != nil {
			b.Fatal(err)
		}
		frame := append([]byte(nil), w.Bytes()...)
		b.Run(fmt.Sprintf("op=sign/size=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				copy(buf, frame)
				if _, err := a.Sign(buf, len(frame)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("op=verify/size=%d", n), func(b *testing.B) {
			copy(buf, frame)
			m, _ := a.Sign(buf, len(frame))
			signed := append([]byte(nil), buf[:m]...)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				copy(buf, signed)
				if _, err := a.Verify(buf[:m]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
