package classify

import (
	"bytes"
	"strings"
)

// A model this account, plan, server or router cannot serve, read as a
// pattern rather than a list of wordings (docs/classifier.md, "Model not
// found: one rule for every vendor"). Nine rounds of fresh corpora showed
// that every vendor words it its own way ("is not a valid model ID", "Model
// not supported by provider together", "model fade out", "invalid
// model_uri"), so a list of wordings never reaches the next vendor's. The
// pattern is: a message whose subject is the model (the word "model",
// "models/…", "model_uri", "模型") and that says, close to it, that the model
// is unavailable (invalid, not valid, not found, not supported, unsupported,
// not available, no longer available, does not exist, cannot be loaded, not
// purchased, no access, denied, disabled, paused, deprecated, retired, faded
// out, 不存在, 不支持, 无权限, 未开通 …). It is not the pattern when the
// message names a request capability or part together with the model as the
// one that lacks it ("image input is not supported for this model", "the
// request is not supported by this model", "'max_tokens' is not supported
// with this model"): that request is wrong, the model is fine, and the
// request rows decide (rejected). An active "the model does not support
// images" states no unavailability at all. A message that calls the
// condition temporary ("temporarily unavailable", "overloaded", "try again
// later") is not the pattern either: capacity, not a held key.
//
// The same reading covers the route a pipeline calls: a wrong base URL or
// path ("url error, please check url", "invalid URL", "path not found", "no
// route matched") fails every record the same way, like a 404 (which is
// model_unavailable already, whatever its body).
//
// heldLower decides it on lower-case text; modelUnservable lowers a raw
// message first. Both are pure and allocate nothing on the path every error
// takes (a message with no subject word returns after one scan per subject).

// modelWindowBefore and modelWindowAfter bound the text around a subject
// word in which an unavailability word counts: it must be about the model,
// not somewhere else in a long message.
const (
	modelWindowBefore = 48
	modelWindowAfter  = 96
)

var (
	// unavailableCJK are the Chinese words that say the model cannot be
	// served (Z.ai's 模型不存在, relays' 无权限 and 未开通, …).
	unavailableCJK = [][]byte{
		[]byte("不存在"), []byte("不支持"), []byte("无权限"), []byte("无权"),
		[]byte("未开通"), []byte("已下线"), []byte("不可用"), []byte("未授权"),
	}
	// routeWrong are the words that say the called route is wrong.
	routeWrong = [][]byte{
		[]byte("url error"), []byte("check url"), []byte("invalid url"),
		[]byte("invalid path"), []byte("path not found"), []byte("route not found"),
		[]byte("no route matched"), []byte("unknown path"),
	}

	// requestParts name a request capability or part: when one is in the
	// message and the model is named as the one that lacks it ("… for this
	// model"), the request is what is wrong.
	requestParts = [][]byte{
		[]byte("image"), []byte("vision"), []byte("multimodal"), []byte("audio"),
		[]byte("video"), []byte("pdf"), []byte("file"), []byte("attachment"),
		[]byte("tool"), []byte("function"), []byte("json"), []byte("response_format"),
		[]byte("schema"), []byte("stream"), []byte("logprob"), []byte("max_tokens"),
		[]byte("max_completion_tokens"), []byte("max_output_tokens"),
		[]byte("temperature"), []byte("top_p"), []byte("top_k"), []byte("param"),
		[]byte("argument"), []byte("context"), []byte("reasoning"), []byte("thinking"),
		[]byte("message"), []byte("content"), []byte("prompt"), []byte("system"),
		[]byte("role"), []byte("cache_control"), []byte("seed"), []byte("penalty"),
		[]byte("the request"), []byte("this request"), []byte("your request"),
		[]byte("图片"), []byte("图像"), []byte("工具"), []byte("函数"), []byte("参数"),
		[]byte("上下文"),
	}
	// routeParts are the request parts that carry a URL of their own ("invalid
	// image URL" is the request's).
	routeParts = [][]byte{
		[]byte("image"), []byte("file"), []byte("audio"), []byte("video"),
		[]byte("pdf"), []byte("attachment"), []byte("webhook"), []byte("callback"),
	}
	// lacksCue names the model as the one that lacks a capability.
	lacksCue = [][]byte{
		[]byte("for this model"), []byte("by this model"), []byte("with this model"),
		[]byte("on this model"), []byte("in this model"), []byte("for the model"),
		[]byte("by the model"), []byte("with the model"), []byte("for model"),
		[]byte("with model"), []byte("by model"), []byte("only support"),
		[]byte("该模型"), []byte("此模型"),
	}
	// passing says the condition is temporary.
	passing = [][]byte{
		[]byte("temporarily"), []byte("overloaded"), []byte("try again later"),
		[]byte("retry later"), []byte("too busy"), []byte("high demand"),
		[]byte("no route to host"), []byte("currently unavailable"),
		[]byte("unknown error"), []byte("internal error"), []byte("server error"),
		[]byte("loading model"), []byte("model is loading"), []byte("capacity"),
	}
	// requestFaults say the request, not the model, is what is invalid or
	// too big ("Invalid request: Your request exceeded model token limit").
	requestFaults = [][]byte{
		[]byte("invalid request"), []byte("invalid parameter"), []byte("invalid argument"),
		[]byte("invalid value"), []byte("invalid input"), []byte("invalid type"),
		[]byte("token limit"), []byte("context length"), []byte("context window"),
		[]byte("maximum context"),
	}
)

// modelUnservable reports whether msg (any case, at most modelScan bytes
// read) says a model or the called route cannot be served. It allocates
// nothing, and a message that does not name the model or a route costs a
// few substring searches.
func modelUnservable(msg string) bool {
	if len(msg) > modelScan {
		msg = msg[:modelScan]
	}
	if !modelNear(msg) && !routeNear(msg) {
		return false
	}
	var buf [modelScan]byte
	n := copy(buf[:], msg)
	lowerASCII(buf[:n])
	return heldDecide(buf[:n], !modelNear(msg))
}

// heldLower is modelUnservable on lower-case text (the signal layer's).
func heldLower(s string) bool {
	if !modelNear(s) && !routeNear(s) {
		return false
	}
	return heldDecide([]byte(s), !modelNear(s))
}

// heldDecide is the rest of the pattern once a subject stands near an
// unavailability word, on lower-case s.
func heldDecide(s []byte, route bool) bool {
	if containsAny(s, passing) || containsAny(s, requestFaults) {
		return false
	}
	if route {
		// A wrong route names no request part with a URL of its own
		// ("invalid image URL" is the request's).
		return !containsAny(s, routeParts)
	}
	// The model named as lacking a request capability: the request.
	return !(containsAny(s, lacksCue) && containsAny(s, requestParts))
}

// modelNear reports whether the model is named (the word "model" in any
// case, "models/…", "model_uri", 模型) with an unavailability word close to
// it.
func modelNear(s string) bool {
	for from := 0; ; {
		k := strings.Index(s[from:], "odel")
		if k < 0 {
			break
		}
		at := from + k
		from = at + 4
		if at == 0 || s[at-1]|0x20 != 'm' {
			continue
		}
		if unavailableNear(s, at-1, at+4) {
			return true
		}
	}
	for from := 0; ; {
		k := strings.Index(s[from:], "模型")
		if k < 0 {
			break
		}
		at := from + k
		from = at + len("模型")
		lo, hi := max(0, at-modelWindowBefore), min(len(s), at+len("模型")+modelWindowAfter)
		if containsWord([]byte(s[lo:hi]), unavailableCJK) || unavailableNear(s, at, at+len("模型")) {
			return true
		}
	}
	return false
}

// unavailableNear reports whether an unavailability word stands in the
// window around s[at:end], read word by word.
func unavailableNear(s string, at, end int) bool {
	lo, hi := max(0, at-modelWindowBefore), min(len(s), end+modelWindowAfter)
	var win [modelWindowBefore + modelWindowAfter + 16]byte
	w := win[:copy(win[:], s[lo:hi])]
	lowerASCII(w)
	var prev, prev2 string
	for len(w) > 0 {
		var word []byte
		word, w = nextWord(w)
		if len(word) == 0 || len(word) > 16 {
			// No unavailability word is longer; a longer one (a quota
			// metric, a model id) is only passed over.
			prev2, prev = prev, ""
			continue
		}
		if unavailableWord(string(word), prev, prev2) {
			return true
		}
		prev2, prev = prev, wordKey(word)
	}
	return false
}

// wordKey keeps the few words unavailableWord looks back at, as constants,
// so that remembering them allocates nothing.
func wordKey(w []byte) string {
	switch string(w) {
	case "not":
		return "not"
	case "no":
		return "no"
	case "a":
		return "a"
	case "have":
		return "have"
	case "to":
		return "to"
	case "cannot":
		return "cannot"
	case "can't":
		return "can't"
	case "couldn't":
		return "couldn't"
	case "doesn't":
		return "doesn't"
	case "don't":
		return "don't"
	case "isn't":
		return "isn't"
	case "unable":
		return "unable"
	case "failed":
		return "failed"
	case "error":
		return "error"
	case "fade":
		return "fade"
	case "faded":
		return "faded"
	}
	return ""
}

// unavailableWord reports whether word, after prev2 and prev, completes an
// unavailability phrase: invalid, unsupported, not found, not a valid, no
// longer, does not exist, don't have access, cannot load, failed to load,
// error loading, fade out … (English; the Chinese ones are substrings).
func unavailableWord(word, prev, prev2 string) bool {
	switch word {
	case "invalid", "unsupported", "unavailable", "unknown", "unrecognized", "unrecognised",
		"inaccessible", "denied", "disabled", "paused", "deprecated", "retired",
		"decommissioned", "discontinued", "unpurchased":
		return true
	case "valid", "found", "supported", "available", "exist", "exists", "loaded", "deployed",
		"accessible", "allowed", "permitted", "authorized", "enabled", "activated", "purchased":
		return negated(prev) || prev == "a" && negated(prev2)
	case "longer", "such":
		return prev == "no"
	case "access":
		return prev == "no" || prev == "have" && negated(prev2) || prev == "to" && prev2 == "unable"
	case "load":
		return negated(prev) || prev == "to" && (prev2 == "unable" || prev2 == "failed")
	case "loading":
		return prev == "error"
	case "out":
		return prev == "fade" || prev == "faded"
	}
	return false
}

// negated reports whether w negates the word after it.
func negated(w string) bool {
	switch w {
	case "not", "cannot", "can't", "couldn't", "doesn't", "don't", "isn't":
		return true
	}
	return false
}

// nextWord splits the next ASCII word (letters, digits, '_' and an
// apostrophe inside it) off lower-case s.
func nextWord(s []byte) (word, rest []byte) {
	i := 0
	for i < len(s) && !wordByte(s[i]) {
		i++
	}
	j := i
	for j < len(s) && (wordByte(s[j]) || s[j] == '\'' && j > i && j+1 < len(s) && wordByte(s[j+1])) {
		j++
	}
	return s[i:j], s[j:]
}

// routeScan bounds the message routeNear reads: a proxy's or server's
// wrong-route error is terse ("url error, please check url", "404 page not
// found", "no Route matched with those values"), and a long message is
// left alone, which keeps the pattern cheap on the long quota messages
// every error path sees.
const routeScan = 256

// routeNear reports whether a route (URL, path) is named as wrong.
func routeNear(s string) bool {
	if len(s) > routeScan {
		return false
	}
	if !strings.Contains(s, "url") && !strings.Contains(s, "URL") && !strings.Contains(s, "ath") &&
		!strings.Contains(s, "ATH") && !strings.Contains(s, "oute") && !strings.Contains(s, "OUTE") {
		return false
	}
	var buf [routeScan]byte
	n := copy(buf[:], s)
	lowerASCII(buf[:n])
	return containsWord(buf[:n], routeWrong)
}

// lowerASCII lowers the ASCII letters of s in place.
func lowerASCII(s []byte) {
	for i, c := range s {
		if 'A' <= c && c <= 'Z' {
			s[i] = c + ('a' - 'A')
		}
	}
}

// containsWord reports whether one of words stands in s as a word's end: an
// ASCII word must not run on into a letter, digit or underscore, so that a
// type or code ("invalid_request_error", "unavailable_error") is not read as
// the word.
func containsWord(s []byte, words [][]byte) bool {
	for _, w := range words {
		for from := 0; ; {
			k := bytes.Index(s[from:], w)
			if k < 0 {
				break
			}
			end := from + k + len(w)
			if end == len(s) || !wordByte(s[end]) || !wordByte(w[len(w)-1]) {
				return true
			}
			from = end
		}
	}
	return false
}

// containsAny reports whether one of words is in s (a prefix counts:
// "tool" is in "tools" and "tool_choice").
func containsAny(s []byte, words [][]byte) bool {
	for _, w := range words {
		if bytes.Contains(s, w) {
			return true
		}
	}
	return false
}

// wordByte reports whether c continues an ASCII word.
func wordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_'
}
