#!/usr/bin/env bash
# The original code of the ported models, for the live comparison of the parity tests
# (tests/models/test_yi_vl_parity.py, tests/models/test_mantis_parity.py, tests/models/test_minigpt_v2_parity.py,
# tests/models/test_vila_parity.py, tests/models/test_llama_vid_parity.py, tests/models/test_cheetor_parity.py,
# tests/models/test_video_llama_2_parity.py, tests/models/test_valley_parity.py, tests/models/test_videochat2_parity.py,
# tests/models/test_lwm_parity.py), which run it in .venv-llava (.ci/llava-official.sh), .venv-minigpt-v2
# (.ci/minigpt-v2-official.sh), .venv-vila (.ci/vila-official.sh), .venv-llama-vid (.ci/llama-vid-official.sh),
# .venv-cheetor (.ci/cheetor-official.sh), .venv-video-llama-2 (.ci/video-llama-2-official.sh), .venv-valley
# (.ci/valley-official.sh), .venv-videochat2 (.ci/videochat2-official.sh) or .venv-lwm (.ci/lwm-official.sh):
# the VL folder of github.com/01-ai/Yi,
# the mantis package of github.com/TIGER-AI-Lab/Mantis, the minigpt4 package and eval_configs of
# github.com/Vision-CAIR/MiniGPT-4, the llava package of github.com/Efficient-Large-Model/VILA (the code base
# of VILA's first release; github.com/NVlabs/VILA took it over from 2024-05-13 without this history), the
# llamavid package of github.com/dvlab-research/LLaMA-VID, the cheetah package and eval_configs of
# github.com/DCDmllm/Cheetah, the video_llama package and eval_configs of github.com/DAMO-NLP-SG/Video-LLaMA,
# the valley package of github.com/RupertLuo/Valley, the video_chat2 folder of github.com/OpenGVLab/Ask-Anything
# and the lwm package of github.com/LargeWorldModel/LWM, each at the commit the kit follows, unpacked into
# .original-code/ (git-ignored). Nothing of it enters the kit. Takes seconds. The commits below are the ones
# the golden fixtures (tests/golden/parity/) were recorded from; changing one fails the golden comparison
# until the live test re-records them (MILEBENCH_RECORD_PARITY=1). Where GitHub cannot be reached it says so
# and exits 0: the parity tests still hold the kit to the golden fixtures; only the live comparison skips.
set -uo pipefail
cd "$(dirname "$0")/.."

YI=24ce52c7d1dd3e282fbb40ed2fedcc02add13931      # 2024-04-16, the last change to VL/
MANTIS=5f67d7a0e061330de41736ad16083fceb971aba1  # 2024-05-18, Mantis-bakllava-7b's code
MINIGPT=68d81af31cc9237032e32e44947c5e04eb52b121 # 2023-11-08, the last change to minigpt4/ (HEAD changes no code)
VILA=e69a11a6aec9c110bfe8e45c2219cb80d2607e9f    # 2024-04-17, the last commit before VILA1.5 (2024-05-03)
LLAMA_VID=d1074f3662a772d1b3c723416af59314ba593f67 # 2024-01-10, the last change to its code (HEAD: README only)
CHEETAH=bc9f3ad3e622bfe4e7f2316d50226a75d102ca71 # 2023-08-11, the last change to Cheetah/cheetah/ (HEAD: READMEs)
VIDEO_LLAMA=ae12557b8510a7cc94baa3d3aea58ea07f6de76a # 2023-11-14, the code base as the paper found it
VALLEY=ffd7c452270932d76e5159b923243a49f0af2c78  # 2024-02-22, the code base as the paper found it (HEAD: README only)
ASK_ANYTHING=46c76723ad03005aa30d23cff423f90ce8801ff7 # 2024-04-06, VideoChat2 as the paper found it
LWM=59d4dbe38b5bc660421d76c5ce38f1b6c6fd926a     # 2024-03-02, the code base as the paper found it (JAX)

fetch() {  # owner/name commit folder-in-repo target
  rm -rf "$4" && mkdir -p "$4"
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import io, sys, tarfile, urllib.request
repo, commit, folder, target = sys.argv[1:]
try:
    with urllib.request.urlopen(f"https://codeload.github.com/{repo}/tar.gz/{commit}", timeout=120) as answer:
        archive = tarfile.open(fileobj=io.BytesIO(answer.read()), mode="r:gz")
except OSError as err:
    sys.exit(f"{repo}@{commit}: {err}")
top = f"{repo.split('/')[1]}-{commit}/{folder}/"
members = [m for m in archive.getmembers() if m.name.startswith(top) and (m.isfile() or m.isdir())]
if not members:
    sys.exit(f"{repo}@{commit}: no {folder}/ in the archive")
for member in members:
    member.name = member.name[len(top):] or "."
archive.extractall(target, members=members, filter="data")
PY
}

fetch 01-ai/Yi "$YI" VL .original-code/Yi/VL ||
  { echo "original code: Yi-VL unavailable; its live parity comparison will skip"; rm -rf .original-code/Yi; }
fetch TIGER-AI-Lab/Mantis "$MANTIS" mantis .original-code/Mantis/mantis ||
  { echo "original code: Mantis unavailable; its live parity comparison will skip"; rm -rf .original-code/Mantis; }
{ fetch Vision-CAIR/MiniGPT-4 "$MINIGPT" minigpt4 .original-code/MiniGPT-4/minigpt4 &&
  fetch Vision-CAIR/MiniGPT-4 "$MINIGPT" eval_configs .original-code/MiniGPT-4/eval_configs; } ||
  { echo "original code: MiniGPT-v2 unavailable; its live parity comparison will skip"; rm -rf .original-code/MiniGPT-4; }
fetch Efficient-Large-Model/VILA "$VILA" llava .original-code/VILA/llava ||
  { echo "original code: VILA unavailable; its live parity comparison will skip"; rm -rf .original-code/VILA; }
fetch dvlab-research/LLaMA-VID "$LLAMA_VID" llamavid .original-code/LLaMA-VID/llamavid ||
  { echo "original code: LLaMA-VID unavailable; its live parity comparison will skip"; rm -rf .original-code/LLaMA-VID; }
{ fetch DCDmllm/Cheetah "$CHEETAH" Cheetah/cheetah .original-code/Cheetah/cheetah &&
  fetch DCDmllm/Cheetah "$CHEETAH" Cheetah/eval_configs .original-code/Cheetah/eval_configs; } ||
  { echo "original code: Cheetor unavailable; its live parity comparison will skip"; rm -rf .original-code/Cheetah; }
{ fetch DAMO-NLP-SG/Video-LLaMA "$VIDEO_LLAMA" video_llama .original-code/Video-LLaMA/video_llama &&
  fetch DAMO-NLP-SG/Video-LLaMA "$VIDEO_LLAMA" eval_configs .original-code/Video-LLaMA/eval_configs; } ||
  { echo "original code: Video-LLaMA-2 unavailable; its live parity comparison will skip"; rm -rf .original-code/Video-LLaMA; }
fetch RupertLuo/Valley "$VALLEY" valley .original-code/Valley/valley ||
  { echo "original code: Valley unavailable; its live parity comparison will skip"; rm -rf .original-code/Valley; }
fetch OpenGVLab/Ask-Anything "$ASK_ANYTHING" video_chat2 .original-code/Ask-Anything/video_chat2 ||
  { echo "original code: VideoChat2 unavailable; its live parity comparison will skip"; rm -rf .original-code/Ask-Anything; }
fetch LargeWorldModel/LWM "$LWM" lwm .original-code/LWM/lwm ||
  { echo "original code: LWM unavailable; its live parity comparison will skip"; rm -rf .original-code/LWM; }
exit 0
