package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
)

var proseWords = strings.Fields(`the of and to in a is that for it as was with be by on not he I this are
or his from at which but have an they you were her she there been one all we their has would when if so
no will more can about what up out them some only time into could other than then now its also after
two over first new like these way may any people made most years should very through before great where
much good well still each same because world government between life under never being while last might
system small number house form however without again place around help state against little long years
thought school important river mountain ocean language history science music theory evidence question
answer problem model network computer program memory server request response tokenizer inference`)

// proseText returns about n bytes of English-like prose: sentences of
// common words with capitals, commas, numbers, contractions and paragraphs.
func proseText(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for b.Len() < n {
		words := 6 + r.IntN(14)
		for i := 0; i < words; i++ {
			w := proseWords[r.IntN(len(proseWords))]
			switch {
			case i == 0:
				w = strings.ToUpper(w[:1]) + w[1:]
			case r.IntN(25) == 0:
				w += ","
			case r.IntN(40) == 0:
				w += "'s"
			case r.IntN(60) == 0:
				w = "1" + strings.Repeat("0", r.IntN(4))
			}
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(w)
		}
		if r.IntN(6) == 0 {
			b.WriteString(".\n\n")
		} else {
			b.WriteString(". ")
		}
	}
	return b.String()
}

func BenchmarkEncodeProse(b *testing.B) {
	tk := qwen3(b)
	text := proseText(1 << 20)
	dst := make([]int32, 0, len(text))
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		dst = tk.AppendEncode(dst[:0], text)
	}
}

func BenchmarkEncodeProseParallel(b *testing.B) {
	tk := qwen3(b)
	text := proseText(64 << 10)
	b.SetBytes(int64(len(text)))
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]int32, 0, len(text))
		for pb.Next() {
			dst = tk.AppendEncode(dst[:0], text)
		}
	})
}

func BenchmarkEncodeCJK(b *testing.B) {
	tk := qwen3(b)
	text := strings.Repeat("我爱自然语言处理和机器学习。日本語のテキストです。한국어 텍스트입니다. ", 2000)
	dst := make([]int32, 0, len(text))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		dst = tk.AppendEncode(dst[:0], text)
	}
}

func BenchmarkDecode(b *testing.B) {
	tk := qwen3(b)
	ids := tk.Encode(proseText(1 << 20))
	b.SetBytes(1 << 20)
	for b.Loop() {
		_ = tk.Decode(ids, false)
	}
}

func BenchmarkStreamDecode(b *testing.B) {
	tk := qwen3(b)
	ids := tk.Encode(proseText(64 << 10))
	b.SetBytes(64 << 10)
	b.ReportAllocs()
	for b.Loop() {
		d := tk.NewStreamDecoder(false)
		for _, id := range ids {
			_ = d.Add(id)
		}
		_ = d.Flush()
	}
}

func BenchmarkLoad(b *testing.B) {
	data := qwen3Raw(b)
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
