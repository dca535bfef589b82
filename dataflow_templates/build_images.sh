#!/usr/bin/env bash
# Builds and pushes the flex template image once per pipeline, as IMAGE:PIPELINE.
# The tags share every layer; they differ only in the pipeline the launcher starts.
# Usage, from the repository root: dataflow_templates/build_images.sh IMAGE PIPELINE...
# (`make template-image` runs it on Cloud Build, `make template-image-local` here.)
set -euo pipefail
image=$1
shift
for pipeline in "$@"; do
  docker build --file dataflow_templates/Dockerfile --build-arg "PIPELINE=$pipeline" \
    --tag "$image:$pipeline" .
  docker push "$image:$pipeline"
done
