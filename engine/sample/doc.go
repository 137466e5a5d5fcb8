// Package sample turns one sequence's logits into the next token and
// decides where generated text stops.
//
// The sampling pipeline follows vLLM and Hugging Face transformers, in this
// order:
//
//  1. logit bias: bias[id] is added to logits[id];
//  2. repetition penalty (HF/vLLM): for every distinct token of the prompt
//     and of the generated text, a positive logit is divided by the penalty
//     and a non-positive one multiplied by it;
//  3. frequency and presence penalties (OpenAI): for every distinct
//     generated token, logit -= frequency*count + presence;
//  4. temperature: below 1e-5 (including 0) the token is the argmax, ties
//     going to the lowest id, and nothing below applies; otherwise logits
//     are divided by it;
//  5. top-k: tokens whose logit is below the k-th largest are dropped (ties
//     with the k-th are kept, as HF and vLLM do);
//  6. top-p: of the survivors, renormalised, the smallest most-probable set
//     whose mass is at least p is kept (always at least one token; among
//     equal probabilities the lower id ranks first);
//  7. min-p: tokens whose probability is below min_p times the largest are
//     dropped;
//  8. one draw from what is left, renormalised, with the sequence's own
//     PCG generator.
//
// Sampling costs O(vocab) with no allocation per token: top-k up to 256
// uses a bounded heap, larger k a radix select, and top-p a histogram of
// the probabilities rather than a sort of the vocabulary.
//
// Log-probabilities (TopLogProbs, LogProbOf) are those of the model's raw
// logits, as OpenAI reports them, independent of the pipeline above.
//
// StopMatcher implements OpenAI stop strings over streamed text.
package sample
