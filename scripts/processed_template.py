"""The template as CloudFormation gets it, minus what only SAM's own transform adds: parsed by
cfn-lint (intrinsic functions as JSON), SAM's Globals merged into every function (cfn-lint's
merge_globals, the step cfn-lint and SAM both start with). One line per resource, sorted, so a
golden file of it shows a change resource by resource.

    python scripts/processed_template.py template.yaml > tests/golden/processed-template.jsonl

Run with the cfn-lint virtualenv's Python (.tools/venv/bin/python); tests/tests/all/generated.rs does.
"""
import json
import sys

from cfnlint.decode import decode
from cfnlint.template.transforms._sam_globals import merge_globals

template, matches = decode(sys.argv[1])
if matches:
    sys.exit(f"{sys.argv[1]} does not parse: {matches}")
merge_globals(template)
template.pop("Globals", None)
for section in ("Parameters", "Rules", "Conditions", "Outputs"):
    print(json.dumps({section: template.get(section)}, sort_keys=True))
for name in sorted(template["Resources"]):
    print(json.dumps({name: template["Resources"][name]}, sort_keys=True))
