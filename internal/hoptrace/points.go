// Package hoptrace times a write's hops across the client, the leader and
// the followers, for finding where a lone write's latency goes. It is
// compiled in only with the build tag hoptrace; without it Mark is empty
// and costs nothing.
//
// With the tag, a process started with PAXCRON_HOPTRACE=DIR records each
// Mark (point, argument, wall-clock time: the processes share one clock
// on one machine) in memory and, PAXCRON_HOPTRACE_SECONDS (default 14)
// after its first, writes them to DIR/PID.hops and records no more.
// `paxcron-bench hops DIR` lines the files up write by write.
package hoptrace

// Point names a place on a write's path.
type Point uint16

// The points, in the order a write passes them.
const (
	ClientCall        Point = iota + 1 // the client's call begins
	ClientFlushed                      // its frame is written to the stream
	StreamFrameRead                    // the server read a call's frame
	StreamWorkerStart                  // a worker took the call
	NodeTake                           // the replica's loop took the proposal
	TransportSend                      // a message queued for a peer (argument: type<<8 | peer)
	TransportFlushed                   // a peer's frames written (argument: how many)
	TransportReceived                  // a message read from a peer (argument: type<<8 | peer)
	NodeStep                           // the loop steps a peer's message (argument: type<<8 | peer)
	NodeApplied                        // the loop applies an entry (argument: its slot, low 32 bits)
	NodeSaveStart                      // the writer begins a synced save (argument: writes in it)
	NodeSaveEnd                        // the save is durable
	NodeWriteDone                      // the loop took the save's completion
	NodeAwaitDone                      // the proposer learned its command applied
	StreamServed                       // the worker has the call's answer
	StreamAnswerWrite                  // the answer is being written to the stream
	StreamAnswerFlush                  // the stream's buffer is being flushed
	ClientFrameRead                    // the client read an answer's frame
	ClientAnswer                       // the answer is decoded
	ClientDone                         // the client's call returns
	numPoints
)

var pointNames = [numPoints]string{
	ClientCall: "client: call", ClientFlushed: "client: frame flushed",
	StreamFrameRead: "server: call frame read", StreamWorkerStart: "server: worker starts",
	NodeTake: "node: loop takes proposal", TransportSend: "transport: send", TransportFlushed: "transport: flushed",
	TransportReceived: "transport: received", NodeStep: "node: loop takes message", NodeApplied: "node: applied", NodeSaveStart: "node: save starts",
	NodeSaveEnd: "node: save durable", NodeWriteDone: "node: loop takes save", NodeAwaitDone: "node: proposer woken",
	StreamServed: "server: answer ready", StreamAnswerWrite: "server: answer written", StreamAnswerFlush: "server: answer flushed",
	ClientFrameRead: "client: answer frame read", ClientAnswer: "client: answer decoded", ClientDone: "client: call returns",
}

// String is the point's name.
func (p Point) String() string {
	if p == 0 || p >= numPoints {
		return "unknown point"
	}
	return pointNames[p]
}

// Message is TransportSend's, TransportReceived's and NodeStep's argument.
func Message(msgType uint8, peer uint64) uint32 { return uint32(msgType)<<8 | uint32(peer&0xff) }
