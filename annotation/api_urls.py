from django.urls import path

from annotation.adjudication import api as adjudication_api
from annotation.crowd import api as participant_api
from annotation.crowd import prolific_api
from annotation.members import api as member_api
from annotation.studies import api as study_api
from annotation.transfer import api as transfer_api
from annotation.workbench import api as workbench_api

urlpatterns = [
    path("studies/", study_api.StudyListCreate.as_view(), name="api-study-list"),
    path("studies/<slug:slug>/", study_api.StudyDetailUpdate.as_view(), name="api-study-detail"),
    path("studies/<slug:slug>/status", study_api.StudyStatusChange.as_view(), name="api-study-status"),
    path("studies/<slug:slug>/duplicate", study_api.StudyDuplicate.as_view(), name="api-study-duplicate"),
    path("studies/<slug:slug>/items/", study_api.ItemList.as_view(), name="api-item-list"),
    path("studies/<slug:slug>/items/import", transfer_api.ImportUpload.as_view(), name="api-item-import"),
    path("studies/<slug:slug>/items/<path:external_id>", study_api.ItemDetail.as_view(), name="api-item-detail"),
    path(
        "studies/<slug:slug>/annotations/import",
        transfer_api.AnnotationImportUpload.as_view(),
        name="api-annotation-import",
    ),
    path(
        "studies/<slug:slug>/annotations/export", transfer_api.AnnotationExport.as_view(), name="api-annotation-export"
    ),
    path("studies/<slug:slug>/exports", transfer_api.ExportJobCreate.as_view(), name="api-export-create"),
    path("studies/<slug:slug>/exports/<int:export_id>", transfer_api.ExportJobDetail.as_view(), name="api-export-job"),
    path(
        "studies/<slug:slug>/exports/<int:export_id>/download",
        transfer_api.ExportJobDownload.as_view(),
        name="api-export-download",
    ),
    path("studies/<slug:slug>/imports/<int:pk>", transfer_api.ImportJobDetail.as_view(), name="api-import-job"),
    path("studies/<slug:slug>/members", member_api.MemberList.as_view(), name="api-member-list"),
    path("studies/<slug:slug>/members/<int:member_id>", member_api.MemberDetail.as_view(), name="api-member-detail"),
    path(
        "studies/<slug:slug>/members/<int:member_id>/password",
        member_api.MemberPasswordReset.as_view(),
        name="api-member-password",
    ),
    path("studies/<slug:slug>/invites", member_api.InviteList.as_view(), name="api-invite-list"),
    path("studies/<slug:slug>/invites/<int:invite_id>", member_api.InviteDetail.as_view(), name="api-invite-detail"),
    path(
        "studies/<slug:slug>/participants",
        participant_api.ParticipantPayments.as_view(),
        name="api-participant-payments",
    ),
    *prolific_api.urlpatterns,  # studies/<slug>/participants/prolific...
    path(
        "studies/<slug:slug>/participants/link",
        participant_api.ParticipantLinkSettings.as_view(),
        name="api-participant-link",
    ),
    path(
        "studies/<slug:slug>/participants/link/rotate",
        participant_api.ParticipantLinkRotate.as_view(),
        name="api-participant-link-rotate",
    ),
    path("studies/<slug:slug>/assignments/next", workbench_api.NextAssignment.as_view(), name="api-assignment-next"),
    path("studies/<slug:slug>/training/next", workbench_api.NextTrainingItem.as_view(), name="api-training-next"),
    *(
        path(
            f"studies/<slug:slug>/questionnaires/{kind}",
            workbench_api.Questionnaire.as_view(),
            {"kind": kind},
            name=f"api-questionnaire-{kind}",
        )
        for kind in ("pre", "quiz", "post")
    ),
    path("studies/<slug:slug>/training/answer", workbench_api.AnswerTrainingItem.as_view(), name="api-training-answer"),
    path(
        "assignments/<int:assignment_id>/submit", workbench_api.SubmitAssignment.as_view(), name="api-assignment-submit"
    ),
    path("assignments/<int:assignment_id>/skip", workbench_api.SkipAssignment.as_view(), name="api-assignment-skip"),
    path("assignments/<int:assignment_id>/flag", workbench_api.FlagAssignment.as_view(), name="api-assignment-flag"),
    path(
        "studies/<slug:slug>/adjudications/queue",
        adjudication_api.AdjudicationQueue.as_view(),
        name="api-adjudication-queue",
    ),
    path(
        "studies/<slug:slug>/adjudications/settings",
        adjudication_api.AdjudicationSettings.as_view(),
        name="api-adjudication-settings",
    ),
    path(
        "studies/<slug:slug>/adjudications/import",
        adjudication_api.AdjudicationImport.as_view(),
        name="api-adjudication-import",
    ),
    path(
        "studies/<slug:slug>/adjudications/items/<path:external_id>",
        adjudication_api.AdjudicationItem.as_view(),
        name="api-adjudication-item",
    ),
    path("invites/<str:token>/signup", member_api.InviteSignup.as_view(), name="api-invite-signup"),
    path("invites/<str:token>/join", member_api.InviteJoin.as_view(), name="api-invite-join"),
]
