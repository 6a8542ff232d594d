"""Write the large programs of stop_when_told.test: ``make_big.py dense N`` (an N-element
dense<> literal) or ``make_big.py splat`` (a 40 GB splat); the program goes to stdout."""

import sys

HEAD = "func.func @main() -> !tfrt.chain {\n  %ch = tfrt.new.chain\n"
TAIL = "  tfrt.return %ch : !tfrt.chain\n}\n"

if sys.argv[1] == "dense":
    n = int(sys.argv[2])
    values = ", ".join(["1"] * n)
    body = f"  %a = corert.const_dense_tensor dense<[{values}]> : tensor<{n}xi32>\n"
else:
    body = "  %a = corert.const_dense_tensor dense<1.5> : tensor<100000x100000xf32>\n"
sys.stdout.write(HEAD + body + TAIL)
