package bridge

import (
	"fmt"
	"strings"
)

// FormatSendStats renders a sending end's counters as one line.
func FormatSendStats(s SendStats) string {
	return fmt.Sprintf("bridge: stats role=send stored=%d tcp_rewinds=%d tcp_bytes=%d udp_packets=%d udp_bytes=%d udp_refused=%d hellos=%d commands=%d injected=%d dropped=%d tls_refused=%d",
		s.Service.Contiguous, s.Rewind.Accepted, s.Rewind.Bytes, s.UDPPackets, s.UDPBytes, s.UDPRefused, s.Hellos, s.Commands, s.Injected, s.Dropped, s.TLSRefused)
}

// FormatReceiveStats renders a receiving end's counters as one line,
// with a group per channel: packets, bytes, first-arrival share,
// duplicates, lag behind the first arrival (mean and max µs) and in seqs,
// repairs.
func FormatReceiveStats(s ReceiveStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bridge: stats role=receive stored=%d delivered=%d next=%d published=%d heartbeats=%d commands=%d naks=%d unheld=%d",
		s.Service.Contiguous, s.Delivered, s.NextSeq, s.Published, s.Heartbeats, s.Commands, s.Service.Naks.Naks, s.Unheld)
	for i, c := range s.Channels {
		mean := uint64(0)
		if c.LagSamples > 0 {
			mean = c.LagSumNs / c.LagSamples / 1000
		}
		lag := uint64(0)
		if s.MaxSeq > c.LastSeq {
			lag = s.MaxSeq - c.LastSeq
		}
		fmt.Fprintf(&b, " [%s packets=%d bytes=%d first=%.3f dups=%d lag_us=%d max_lag_us=%d lag_seqs=%d repairs=%d]",
			strings.ReplaceAll(s.Names[i], " ", ":"), c.Packets, c.Bytes, c.FirstShare(s.Delivered), c.Dups, mean, c.LagMaxNs/1000, lag, c.Repairs)
	}
	return b.String()
}
