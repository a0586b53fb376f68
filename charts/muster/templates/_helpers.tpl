{{/*
muster.image is the image a values.image names, or the one given when it
names none: repository, then @digest or :tag.
*/}}
{{- define "muster.image" -}}
{{- $v := index . 0 -}}
{{- $shipped := index . 1 -}}
{{- if or $v.repository $v.tag $v.digest -}}
{{- $repository := $v.repository | default (regexReplaceAll "[:@].*$" $shipped "") -}}
{{- if $v.digest -}}{{ $repository }}@{{ $v.digest }}{{- else -}}{{ $repository }}:{{ $v.tag | default "latest" }}{{- end -}}
{{- else -}}{{ $shipped }}{{- end -}}
{{- end -}}

{{/*
muster.deployment renders a Deployment of the manifests with the values
of its program: image, replicas, resources, and extra args; the objects
after it in its file as they are.
*/}}
{{- define "muster.deployment" -}}
{{- $docs := splitList "\n---\n" (index . 0) -}}
{{- $d := first $docs | fromYaml -}}
{{- $v := index . 1 -}}
{{- $args := index . 2 -}}
{{- $c := index $d.spec.template.spec.containers 0 -}}
{{- $_ := set $c "image" (include "muster.image" (list $v.image $c.image)) -}}
{{- if not (kindIs "invalid" $v.replicas) -}}{{- $_ := set $d.spec "replicas" $v.replicas -}}{{- end -}}
{{- if $v.resources -}}{{- $_ := set $c "resources" $v.resources -}}{{- end -}}
{{- if $args -}}{{- $_ := set $c "args" (concat $c.args $args) -}}{{- end -}}
{{ toYaml $d }}
{{- range rest $docs }}
---
{{ . }}
{{- end }}
{{- end -}}
