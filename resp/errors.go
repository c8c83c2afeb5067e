package resp

// The wire's error texts, Redis's words. The guard writes its own (the
// violations below); the server writes the others as error replies.
const (
	// TextQueryBuffer answers a command that outgrew the query buffer
	// limit (ErrQueryBuffer).
	TextQueryBuffer = "ERR Protocol error: query buffer limit exceeded"
	// TextUnbalancedQuotes answers an inline command whose quotes do
	// not close (UnbalancedQuotes).
	TextUnbalancedQuotes = "ERR Protocol error: unbalanced quotes in request"
	// TextNotTLS answers a plain RESP client on a TLS port.
	TextNotTLS = "ERR Protocol error: this port accepts TLS connections only"
)

// guardErrText holds Redis's texts for the guard's violations, which the
// guard writes itself, under the reader, prefixed with "-ERR ".
var guardErrText = [...]string{
	guardMultibulkLen: "Protocol error: invalid multibulk length",
	guardBulkLen:      "Protocol error: invalid bulk length",
	guardInline:       "Protocol error: too big inline request",
	guardDollar:       "Protocol error: expected '$', got '",

	guardUnauthMultibulkLen: "Protocol error: unauthenticated multibulk length",
	guardUnauthBulkLen:      "Protocol error: unauthenticated bulk length",
}
