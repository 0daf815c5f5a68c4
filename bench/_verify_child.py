"""The set-up both verification CPU benches run in their child process.

``bench/verify_cpu_ab.py`` and ``bench/verify_instructions.py`` each start a child
Python per checkout (``root``) so that two trees' code never share a process; the child
script is text. This is its common middle: ``root``'s code on the path, the shipped
policies loaded, a :class:`Verifier`, the ``default`` policy with its candidates and the
``grounding`` policy, 40 RAG jobs (``work``) and a trace. The script around it sets
``root`` before and defines what one job does after.
"""

RUNTIME_SETUP = r'''
sys.path.insert(0, root); sys.path.insert(0, root + "/bench")
import profile_rag_verify as P
from gateway.text import index as I
if cold:
    I.IndexCache.get = lambda self, docs: I.build_index(docs)
async def main():
    settings = P.load_settings(environ={}, overrides={"policies_dir": str(P.REPO / "policies")})
    async with P.open_runtime(settings) as runtime:
        verifier = P.Verifier(runtime)
        pol = runtime.policies.policies
        default, grounding = pol["default"], pol["grounding"]
        ref = P.PolicyRef(default.name, default.version)
        cand = tuple(P.PolicyRef(pol[c].name, pol[c].version) for c in default.spec.candidates)
        work = P.jobs(40, ref, cand)
        gref = P.PolicyRef(grounding.name, grounding.version)
        trace = P.RequestTrace()
'''
