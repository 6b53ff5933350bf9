# infera decide on cuda vs cpu vs the fixture reference (token-id form): max |diff| per field.
import json, sys
cpu, cuda = (json.load(open(p))["results"] for p in sys.argv[1:3])
ref = json.load(open(sys.argv[3]))["cases"]
ref = ref + [ref[1]]
keys = ("option_logits", "option_probs", "features", "action_logits", "action_probs")
def worst(a, b):
    return max(abs(x - y) for ra, rb in zip(a, b) for k in keys for x, y in zip(ra[k], rb[k]))
print("cuda vs cpu max |diff| %.3g; cuda vs reference %.3g; cpu vs reference %.3g; actions equal: %s"
      % (worst(cuda, cpu), worst(cuda, ref), worst(cpu, ref),
         [r["action"] for r in cuda] == [r["action"] for r in cpu]))
