package proxy

import "unicode/utf8"

// TextChunks cuts a stream of output into pieces that can be sent as
// text as they come: a UTF-8 sequence split between two writes is held
// back until its last bytes arrive, so no piece ends inside a character.
// Live output (`proxy exec --stream`, the MCP server's progress
// notifications) goes through one per stream.
type TextChunks struct{ carry []byte }

// Next returns what of the held bytes and p can go out now.
func (c *TextChunks) Next(p []byte) []byte {
	data := append(c.carry, p...)
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	c.carry = append([]byte(nil), data[cut:]...)
	return data[:cut]
}

// Rest returns the bytes still held: the stream ended inside a sequence.
func (c *TextChunks) Rest() []byte {
	r := c.carry
	c.carry = nil
	return r
}
