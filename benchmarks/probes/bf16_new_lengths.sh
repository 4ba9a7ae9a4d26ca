#!/usr/bin/env bash
# Does bf16 autocast pay a one-off cost at each new sequence length on this GPU (cuDNN's
# attention plans), where fp32 does not? hf_bert_custom_loop pads each batch of 16 to its
# longest sentence (128-384 words): nearly every step is a new length early in a run.
# Prints the script's own per-tenth step times (CORPUS_RESULT) for fp32, bf16 (--fix), and
# bf16 with cuDNN's SDPA backend off; then bf16 with batches padded to a multiple of 64.
set -u
cd "$(dirname "$0")/../corpus"
n=${ITERS:-300}
run() { timeout 150 python3 "$@" 2>&1 | grep CORPUS_RESULT; }
echo "fp32:";            run hf_bert_custom_loop.py --iters "$n"
echo "bf16 (--fix):";    run hf_bert_custom_loop.py --fix --iters "$n"
echo "bf16, cudnn sdp off:"
run -c "import runpy, sys, torch; torch.backends.cuda.enable_cudnn_sdp(False); \
sys.argv = ['hf_bert_custom_loop.py', '--fix', '--iters', '$n']; \
runpy.run_path('hf_bert_custom_loop.py', run_name='__main__')"
echo "bf16, batches padded to a multiple of 64:"
run -c "import functools, runpy, sys, transformers; \
transformers.DataCollatorWithPadding = functools.partial(transformers.DataCollatorWithPadding, pad_to_multiple_of=64); \
sys.argv = ['hf_bert_custom_loop.py', '--fix', '--iters', '$n']; \
runpy.run_path('hf_bert_custom_loop.py', run_name='__main__')"
